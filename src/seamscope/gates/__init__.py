"""Pass/fail judgments on what ran: compile budgets (``budget``, the pytest marker) and ``check``'s
limits and baseline, on receipts recomputed first (``trusted``). Imports neither the command line
(``click``, ``seamscope.commands``) nor the experiments."""
