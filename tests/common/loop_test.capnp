# A test-only interface proving Cap'n Proto RPC runs on the EventLoop beside libuv work.
@0xc4efaa5d549c1838;

interface LoopProbe {
  # Waits `delayMs` on a uv timer, then computes `text` reversed on the uv thread pool.
  reverseLater @0 (text :Text, delayMs :UInt32) -> (text :Text, workerThreadDiffers :Bool);
}
