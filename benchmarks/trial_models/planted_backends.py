"""Test backends for remedy trials: one that changes outputs by 1%, one that kills the interpreter."""
import os
import signal


def scaled(gm, example_inputs):
    def run(*args):
        out = gm(*args)
        if isinstance(out, (list, tuple)) and out:
            return type(out)([out[0] * 1.01, *out[1:]])
        return out * 1.01

    return run


def crash(gm, example_inputs):
    os.kill(os.getpid(), signal.SIGSEGV)
    return gm


def hang(gm, example_inputs):
    import time

    time.sleep(3600)
    return gm


_IMPORTED = __import__("time").perf_counter()  # imported when the run's first compilation starts


def slow(gm, example_inputs):
    """A planted slowdown: sleeps 0.4× the time spent since this module was imported (the
    compilation so far), and each call 0.4× its own time: a run made about 40% slower."""
    import time

    time.sleep(0.4 * (time.perf_counter() - _IMPORTED))

    def run(*args):
        t0 = time.perf_counter()
        out = gm(*args)
        time.sleep(0.4 * (time.perf_counter() - t0))
        return out

    return run
