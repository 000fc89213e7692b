"""Measurements that run the user's code again, in fresh processes (the probe's ladder, the shape
study, ``try``'s trials, ``run --warm``): they return values and write their result files. Never
imports the command line (``seamscope.commands``)."""
