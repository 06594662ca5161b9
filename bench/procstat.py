"""Memory of this process image, from /proc/self/status (Linux)."""

from __future__ import annotations

import resource


def status_mib(field: str) -> float:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of this process image in MiB.

    Not ``getrusage``'s ``ru_maxrss`` where /proc is readable: Linux carries that over ``execve``
    from the process that forked, so a child started by ``bench all`` (holding the peers' memory)
    reported ~1.4 GiB for an hour that peaks at ~0.55 GiB.
    """
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith(f"{field}:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
