"""Process mechanisms shared by serve, the handler processes, the model server, the Batch
Transform runner and the tests: stop a process (graceful signal, deadline, SIGKILL), make a
child die with its parent, find free loopback ports, say why a process ended (exit_reason.py),
replace a file whole (files.py), a command line whose errors come first (arguments.py).
Standard library only; imports none of the other packages."""

from process_utils.parent_death import die_with_parent
from process_utils.ports import free_port, free_port_range
from process_utils.stopping import PopenProcess, Stoppable, stop_all, terminate

__all__ = [
    "PopenProcess",
    "Stoppable",
    "die_with_parent",
    "free_port",
    "free_port_range",
    "stop_all",
    "terminate",
]
