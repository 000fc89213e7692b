"""Example workloads shipped with seamscope (``decoder``: what ``demo``, the probe and the shape study
run), written as a user would: at most the public ``experiments.workload``, never capture or the
command line (``click``, ``seamscope.commands``)."""
