"""Running and observing the user's code under torch (sessions, their hooks, the script runner, the
output folder's lock and checkpoints); private torch APIs only in ``adapter/``. Imports neither the
command line (``click``, ``seamscope.commands``) nor the experiments built on it."""
