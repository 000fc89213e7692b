"""Analyses: pure functions from a ledger (or receipt) to new values. Nothing here edits a ledger."""
