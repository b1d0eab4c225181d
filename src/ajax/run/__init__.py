"""The run, one job per module (the host loop that drives them is :mod:`ajax.loop`):

* :mod:`ajax.run.plan`: seeds and keys, iterations and segments, the memory check;
* :mod:`ajax.run.health`: the divergence guard;
* :mod:`ajax.run.program`: the init and segment programs, pure JAX, and their summaries;
* :mod:`ajax.run.lowering`: lowering, the program cache, the seeds split over devices;
* :mod:`ajax.run.supervise`: Ctrl-C and SIGTERM.
"""
