"""``torchrun`` as ``seamscope run --nproc`` starts it, without the traceback of its own stop.

On SIGTERM or SIGHUP, torchrun stops the ranks, then lets its ``SignalException`` out of ``main``
with a traceback, as if it had crashed. Here that exception, and only it, ends the process with
128 + the signal's number instead; everything else is torchrun's as it is
(``python -m seamscope.experiments.torchrun ARGS`` = ``python -m torch.distributed.run ARGS``)."""

from __future__ import annotations

import sys


def main() -> int:
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.run import main as torchrun

    try:
        torchrun()
    except SignalException as e:
        print(f"torchrun: {e.sigval.name}: the ranks were stopped", file=sys.stderr)
        return 128 + int(e.sigval)
    return 0


if __name__ == "__main__":
    sys.exit(main())
