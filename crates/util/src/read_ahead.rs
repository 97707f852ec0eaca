//! A reader that runs on its own thread: the producer side (typically a gzip decoder) reads ahead
//! into a few fixed-size buffers while the consumer works on the previous ones, so that a CPU-bound
//! stage such as inflating overlaps with whatever the consumer does (parsing a tar stream, writing
//! files). Memory stays bounded: at most `depth` buffers wait in the channel, and the consumer hands
//! each emptied buffer back for reuse.
//!
//! The thread is scoped, so the producer may borrow from the caller. Dropping the [`ReadAhead`]
//! stops it: its next send fails and it returns, so a scope never waits on a producer nobody reads.

use std::io::{self, Read};
use std::sync::mpsc::{Receiver, Sender, SyncSender, TryRecvError, channel, sync_channel};
use std::thread::Scope;

/// One message from the producer.
enum Block {
    Data(Vec<u8>),
    /// The producer's reader reached its end.
    End,
    Failed(io::Error),
}

/// The consumer's end: a `Read` over the producer's blocks.
pub struct ReadAhead {
    blocks: Receiver<Block>,
    spent: Sender<Vec<u8>>,
    current: Cursor,
    ended: bool,
}

/// A received block and how much of it was read: what a `Read` over blocks serves from.
#[derive(Default)]
pub struct Cursor {
    data: Vec<u8>,
    pos: usize,
}

impl Cursor {
    /// True when every byte of the block was read.
    pub fn is_spent(&self) -> bool {
        self.pos == self.data.len()
    }

    /// Starts on `data`; returns the previous block (for reuse).
    pub fn replace(&mut self, data: Vec<u8>) -> Vec<u8> {
        self.pos = 0;
        std::mem::replace(&mut self.data, data)
    }

    /// Copies what fits of the unread bytes into `buf`.
    pub fn read_into(&mut self, buf: &mut [u8]) -> usize {
        let n = buf.len().min(self.data.len() - self.pos);
        buf[..n].copy_from_slice(&self.data[self.pos..self.pos + n]);
        self.pos += n;
        n
    }
}

/// Starts a thread named `name` that reads `reader` in blocks of `block` bytes, at most `depth` of
/// them ahead of the consumer.
pub fn read_ahead<'scope, R>(
    scope: &'scope Scope<'scope, '_>,
    name: &str,
    reader: R,
    block: usize,
    depth: usize,
) -> io::Result<ReadAhead>
where
    R: Read + Send + 'scope,
{
    let (blocks_tx, blocks) = sync_channel(depth.max(1));
    let (spent, spent_rx) = channel();
    std::thread::Builder::new()
        .name(name.to_string())
        .spawn_scoped(scope, move || {
            produce(reader, block.max(1), &blocks_tx, &spent_rx)
        })?;
    Ok(ReadAhead {
        blocks,
        spent,
        current: Cursor::default(),
        ended: false,
    })
}

fn produce(
    mut reader: impl Read,
    block: usize,
    blocks: &SyncSender<Block>,
    spent: &Receiver<Vec<u8>>,
) {
    loop {
        let mut buf = match spent.try_recv() {
            Ok(buf) => buf,
            Err(TryRecvError::Empty | TryRecvError::Disconnected) => Vec::with_capacity(block),
        };
        buf.resize(block, 0);
        let (n, failure) = fill(&mut reader, &mut buf);
        buf.truncate(n);
        // A failed send means the consumer is gone: nobody wants the rest. The bytes before a
        // failure go first, so the consumer fails where the reader did (a truncated archive then
        // names the member it cut, not the start of the stream).
        if n > 0 && blocks.send(Block::Data(buf)).is_err() {
            return;
        }
        match failure {
            Some(e) => {
                let _ = blocks.send(Block::Failed(e));
                return;
            }
            // `fill` stops short of a full block only at the end.
            None if n < block => {
                let _ = blocks.send(Block::End);
                return;
            }
            None => {}
        }
    }
}

/// Reads until `buf` is full, the reader ends or fails: decoders return short reads, and full
/// blocks keep the number of messages (and wake-ups) per byte low. Returns the bytes read and the
/// failure that stopped it, if any (the bytes before a failure are worth passing on: the consumer
/// then fails where the reader did).
pub fn fill(reader: &mut impl Read, buf: &mut [u8]) -> (usize, Option<io::Error>) {
    let mut filled = 0;
    while filled < buf.len() {
        match reader.read(&mut buf[filled..]) {
            Ok(0) => break,
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return (filled, Some(e)),
        }
    }
    (filled, None)
}

impl Read for ReadAhead {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        while self.current.is_spent() {
            if self.ended {
                return Ok(0);
            }
            match self.blocks.recv() {
                Ok(Block::Data(data)) => {
                    let old = self.current.replace(data);
                    // The producer may have stopped already; then the buffer is simply freed.
                    let _ = self.spent.send(old);
                }
                Ok(Block::End) => self.ended = true,
                Ok(Block::Failed(e)) => {
                    self.ended = true;
                    return Err(e);
                }
                Err(_) => {
                    self.ended = true;
                    return Err(io::Error::other("the read-ahead thread stopped early"));
                }
            }
        }
        Ok(self.current.read_into(buf))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Yields `data` in pieces of at most `step` bytes, then fails if `fail` is set.
    struct Trickle<'a> {
        data: &'a [u8],
        step: usize,
        fail: bool,
    }

    impl Read for Trickle<'_> {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.data.is_empty() && self.fail {
                return Err(io::Error::other("corrupt deflate stream"));
            }
            let n = buf.len().min(self.step).min(self.data.len());
            buf[..n].copy_from_slice(&self.data[..n]);
            self.data = &self.data[n..];
            Ok(n)
        }
    }

    #[test]
    fn passes_every_byte_through_in_order() {
        let data: Vec<u8> = (0..100_000u32).map(|i| (i % 251) as u8).collect();
        for (block, depth, step) in [(4096, 2, 1000), (1, 1, 7), (1 << 20, 4, 65536)] {
            let got = std::thread::scope(|s| {
                let source = Trickle {
                    data: &data,
                    step,
                    fail: false,
                };
                let mut r = read_ahead(s, "test", source, block, depth).expect("spawn");
                let mut got = Vec::new();
                r.read_to_end(&mut got).expect("read");
                assert_eq!(r.read(&mut [0; 8]).expect("eof"), 0);
                got
            });
            assert_eq!(got, data, "block {block} depth {depth} step {step}");
        }
    }

    #[test]
    fn the_producers_error_reaches_the_reader_after_its_data() {
        let data = vec![7u8; 10_000];
        std::thread::scope(|s| {
            let source = Trickle {
                data: &data,
                step: 3000,
                fail: true,
            };
            let mut r = read_ahead(s, "test", source, 4096, 2).expect("spawn");
            let mut got = Vec::new();
            let e = r.read_to_end(&mut got).expect_err("fails");
            assert_eq!(e.to_string(), "corrupt deflate stream");
            assert_eq!(got.len(), 10_000);
        });
    }

    #[test]
    fn dropping_the_reader_stops_the_producer() {
        // An endless source: the scope would never end if the producer kept running.
        std::thread::scope(|s| {
            let endless = io::repeat(1);
            let mut r = read_ahead(s, "test", endless, 1024, 1).expect("spawn");
            let mut first = [0u8; 10];
            r.read_exact(&mut first).expect("read");
            assert_eq!(first, [1; 10]);
        });
    }
}
