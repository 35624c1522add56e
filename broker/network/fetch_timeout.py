"""How long a long-polling Fetch waits for its answer before giving up (issue 31).

A Fetch is answered at the latest after its own ``max_wait_ms``; one that is not answered well
after that went into a cut link, or into a connection whose answer sits in a TCP retransmit
queue backing off for many seconds after the link healed. Waiting out the full request timeout
(30 s) kept a follower or a mirror fetcher behind for that long after every heal; giving up after
the wait plus a margin, and reconnecting (a timeout closes the connection), bounds that lag.
The margin is at least 2 s, so a loaded peer that answers late is not taken for a dead one, and
at least the wait itself, so a long wait gets proportionally more slack.
"""

MIN_MARGIN_MS = 2000


def fetch_timeout_ms(max_wait_ms: int, request_timeout_ms: int) -> int:
    """The bound for a Fetch with ``max_wait_ms``: never longer than ``request_timeout_ms``."""
    wait = max(0, max_wait_ms)
    return min(request_timeout_ms, wait + max(MIN_MARGIN_MS, wait))
