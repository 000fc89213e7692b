"""Analyses: functions from a ledger (or receipt) to new values. Nothing here edits a ledger or
writes a file.

Three read files, and say so where they do: :func:`ranks.gather` reads the per-rank receipts or
``TORCH_TRACE`` logs of a folder (merging them, :func:`ranks.merge`, reads nothing);
:func:`report_view.findings.read_context` reads the user's source around a finding for the
report; :func:`inputs.script_sha256` hashes the script's bytes for ``run``'s trace. Everything
else is a pure function of its arguments.
"""
