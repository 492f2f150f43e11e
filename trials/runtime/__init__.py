"""Apply a trial's knobs through MindSpore 2.10's current APIs, one concern per module.

- :mod:`.context`: device, execution mode, memory level, CPU threads, jit level;
- :mod:`.support`: refuse what the hardware profile says the backend cannot run;
- :mod:`.parallel`: join the data-parallel group (msrun + mccl on the CPU);
- :mod:`.precision`: mixed precision (``mindspore.amp``);
- :mod:`.applied`: what took effect, as MindSpore reports it back (the start event).

Peak FLOP/s for MFU is :mod:`trials.calibrate`'s; cache paths are :mod:`trials.cache`'s.
"""
