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
