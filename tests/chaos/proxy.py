"""proxy.py - a small TCP proxy for the chaos harness: one listening port per node, each
forwarding to the database, so one node can be cut off while the others still reach it.

A Proxy runs on a shared asyncio loop (ProxyLoop, one background thread). The driver calls
cut(mode) and restore() from its own thread:

  cut("refuse")    close every open connection; new connections are accepted and closed at
                   once (the node sees connection resets: a fast failure)
  cut("blackhole") close every open connection; new connections are accepted and then never
                   answered (the node sees timeouts: a slow failure, like a dead network)
  restore()        close the blackholed connections and forward again
  slow(seconds)    forward, but hold every chunk `seconds` first (latency; 0 ends it)

Runnable alone for manual experiments:
  python3 tests/chaos/proxy.py LISTEN_PORT TARGET_HOST:TARGET_PORT
"""
import asyncio
import sys
import threading

FORWARD, REFUSE, BLACKHOLE = "forward", "refuse", "blackhole"


class ProxyLoop:
    """An asyncio event loop on a daemon thread, shared by all proxies of a run."""

    def __init__(self):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="proxy-loop",
                                       daemon=True)
        self.thread.start()

    def call(self, coro, timeout=10):
        """Runs a coroutine on the loop and returns its result (from another thread)."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def close(self):
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


class Proxy:
    """Forwards 127.0.0.1:listen_port to target_host:target_port until cut."""

    def __init__(self, ploop, name, target_host, target_port, listen_port=0):
        self.ploop = ploop
        self.name = name
        self.target = (target_host, target_port)
        self.mode = FORWARD
        self.server = None
        self.writers = set()      # every open client and upstream stream writer
        self.held = set()         # blackholed client writers
        self.connections = 0      # accepted, for the summary
        self.delay = 0.0          # latency added to every chunk, seconds
        self.port = ploop.call(self._start(listen_port))

    async def _start(self, listen_port):
        self.server = await asyncio.start_server(self._client, "127.0.0.1", listen_port)
        return self.server.sockets[0].getsockname()[1]

    async def _pump(self, reader, writer):
        try:
            while True:
                data = await reader.read(65536)
                if not data:
                    break
                if self.delay:
                    await asyncio.sleep(self.delay)
                writer.write(data)
                await writer.drain()
        except (ConnectionError, OSError, asyncio.CancelledError):
            pass
        finally:
            self._close(writer)

    def _close(self, writer):
        self.writers.discard(writer)
        self.held.discard(writer)
        try:
            writer.close()
        except (ConnectionError, OSError, RuntimeError):
            pass

    async def _client(self, reader, writer):
        self.connections += 1
        if self.mode == REFUSE:
            self._close(writer)
            return
        if self.mode == BLACKHOLE:
            self.held.add(writer)
            try:
                while await reader.read(65536):
                    pass  # swallow everything, answer nothing
            except (ConnectionError, OSError):
                pass
            self._close(writer)
            return
        try:
            up_reader, up_writer = await asyncio.wait_for(
                asyncio.open_connection(*self.target), 5)
        except (OSError, asyncio.TimeoutError):
            self._close(writer)  # the database is down: the node sees a reset
            return
        if self.mode != FORWARD:  # cut while connecting
            self._close(writer)
            self._close(up_writer)
            return
        self.writers.add(writer)
        self.writers.add(up_writer)
        await asyncio.gather(self._pump(reader, up_writer), self._pump(up_reader, writer))

    async def _set(self, mode):
        self.mode = mode
        if mode != FORWARD:
            for w in list(self.writers):
                self._close(w)
        else:
            for w in list(self.held):
                self._close(w)

    def cut(self, mode=REFUSE):
        """Closes every connection and refuses or blackholes new ones."""
        self.ploop.call(self._set(mode))

    def restore(self):
        """Forwards again (blackholed connections are closed so their clients retry)."""
        self.ploop.call(self._set(FORWARD))

    def slow(self, seconds):
        """Adds `seconds` of latency to every chunk from now on (0: none)."""
        async def set_delay():
            self.delay = seconds
        self.ploop.call(set_delay())

    def close(self):
        async def stop():
            await self._set(REFUSE)
            self.server.close()
        self.ploop.call(stop())


def main(argv):
    if len(argv) != 3 or ":" not in argv[2]:
        print(__doc__, file=sys.stderr)
        return 2
    host, port = argv[2].rsplit(":", 1)
    ploop = ProxyLoop()
    proxy = Proxy(ploop, "manual", host, int(port), int(argv[1]))
    print(f"proxy: 127.0.0.1:{proxy.port} -> {host}:{port}; Ctrl-C to stop", file=sys.stderr)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        proxy.close()
        ploop.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
