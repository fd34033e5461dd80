"""Break: one SIGTERM during a ledger write runs an asyncio signal callback twice.

An asyncio program (loop.add_signal_handler) that writes the ledger in its main thread:
the signal's byte reaches asyncio's wakeup fd as it arrives, and deferred() sends the
signal again once the write is done -- a second byte, so asyncio runs the callback twice
(for a server: "a second Ctrl-C forces the exit").
"""

from __future__ import annotations

import asyncio
import signal

from dpframe.core.interrupts import deferred


async def main() -> list[str]:
    loop = asyncio.get_running_loop()
    got: list[str] = []
    loop.add_signal_handler(signal.SIGTERM, lambda: got.append("TERM"))
    with deferred():  # a ledger transaction
        signal.raise_signal(signal.SIGTERM)  # one SIGTERM
    await asyncio.sleep(0.2)
    return got


got = asyncio.run(main())
print("callbacks run:", got)
print("held" if got == ["TERM"] else "BREAK: one SIGTERM, its callback run twice")
