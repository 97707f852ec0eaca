//! A disk seen through a write overlay, so a partition-table change can be written in an order that
//! survives being killed half way. The `gpt` crate writes both entry arrays, then the backup header,
//! then the primary one: a kill while it writes the entries leaves both headers describing arrays whose
//! checksums no longer match, and no tool (nor the next run) can read the table. Here the crate writes
//! into memory; [`Overlay::apply_first`] then writes the changed sectors group by group, each group synced
//! before the next starts, so at every moment one complete, valid table is on the disk.

use std::collections::BTreeMap;
use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::FileExt;

/// Reads see the overlay's sectors over the file's; writes land in the overlay only.
#[derive(Debug)]
pub(crate) struct Overlay {
    file: File,
    sector: u64,
    len: u64,
    pos: u64,
    dirty: BTreeMap<u64, Vec<u8>>,
}

impl Overlay {
    /// Over `file`, whose size is `len` bytes, in sectors of `sector` bytes.
    pub(crate) fn new(file: File, sector: u64, len: u64) -> Overlay {
        Overlay {
            file,
            sector,
            len,
            pos: 0,
            dirty: BTreeMap::new(),
        }
    }

    /// The sectors written since the last apply.
    #[cfg(test)]
    pub(crate) fn dirty_sectors(&self) -> impl Iterator<Item = u64> + '_ {
        self.dirty.keys().copied()
    }

    /// Writes the changed sectors to the file group by group, in the order `group` gives (lower first),
    /// syncing the file after each group, then forgets them. Stops after `limit` sectors, as a kill
    /// would (tests cut a write anywhere this way); true when all were written.
    pub(super) fn apply_first(
        &mut self,
        group: impl Fn(u64) -> u8,
        limit: usize,
    ) -> io::Result<bool> {
        let mut groups: BTreeMap<u8, Vec<u64>> = BTreeMap::new();
        for lba in self.dirty.keys() {
            groups.entry(group(*lba)).or_default().push(*lba);
        }
        let mut written = 0;
        for lbas in groups.values() {
            for lba in lbas {
                if written == limit {
                    return Ok(false);
                }
                if let Some(bytes) = self.dirty.get(lba) {
                    self.file.write_all_at(bytes, lba * self.sector)?;
                }
                written += 1;
            }
            self.file.sync_all()?;
        }
        self.dirty.clear();
        Ok(true)
    }

    /// The current content of sector `lba`: the overlay's, else the file's (zeros past its end).
    fn sector_bytes(&self, lba: u64) -> io::Result<Vec<u8>> {
        if let Some(b) = self.dirty.get(&lba) {
            return Ok(b.clone());
        }
        let mut buf = vec![0u8; self.sector as usize];
        let off = lba * self.sector;
        let mut n = 0;
        while n < buf.len() && off + (n as u64) < self.len {
            match self.file.read_at(&mut buf[n..], off + n as u64)? {
                0 => break,
                k => n += k,
            }
        }
        Ok(buf)
    }
}

impl Read for Overlay {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        let want = (out.len() as u64).min(self.len.saturating_sub(self.pos)) as usize;
        let mut done = 0;
        while done < want {
            let at = self.pos + done as u64;
            let (lba, within) = (at / self.sector, (at % self.sector) as usize);
            let bytes = self.sector_bytes(lba)?;
            let n = (bytes.len() - within).min(want - done);
            out[done..done + n].copy_from_slice(&bytes[within..within + n]);
            done += n;
        }
        self.pos += done as u64;
        Ok(done)
    }
}

impl Write for Overlay {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        let mut done = 0;
        while done < data.len() {
            let at = self.pos + done as u64;
            let (lba, within) = (at / self.sector, (at % self.sector) as usize);
            let mut bytes = self.sector_bytes(lba)?;
            let n = (bytes.len() - within).min(data.len() - done);
            bytes[within..within + n].copy_from_slice(&data[done..done + n]);
            self.dirty.insert(lba, bytes);
            done += n;
        }
        self.pos += done as u64;
        Ok(done)
    }

    /// Nothing reaches the file before [`Overlay::apply_first`].
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Seek for Overlay {
    fn seek(&mut self, to: SeekFrom) -> io::Result<u64> {
        let base = match to {
            SeekFrom::Start(n) => Some(n),
            SeekFrom::End(d) => self.len.checked_add_signed(d),
            SeekFrom::Current(d) => self.pos.checked_add_signed(d),
        };
        self.pos = base.ok_or_else(|| io::Error::other("seek before the start of the disk"))?;
        Ok(self.pos)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn disk(len: usize) -> (tempfile::NamedTempFile, Overlay) {
        let f = tempfile::NamedTempFile::new().unwrap();
        f.as_file().write_all_at(&vec![7u8; len], 0).unwrap();
        let o = Overlay::new(f.reopen().unwrap(), 512, len as u64);
        (f, o)
    }

    #[test]
    fn writes_stay_in_memory_until_applied_in_group_order() {
        let (f, mut o) = disk(4096);
        o.seek(SeekFrom::Start(510)).unwrap();
        o.write_all(&[1, 2, 3, 4]).unwrap();
        o.seek(SeekFrom::End(-512)).unwrap();
        o.write_all(&[9; 512]).unwrap();
        assert_eq!(o.dirty_sectors().collect::<Vec<_>>(), [0, 1, 7]);
        // Read back through the overlay; the file is untouched.
        let mut buf = [0u8; 6];
        o.seek(SeekFrom::Start(509)).unwrap();
        o.read_exact(&mut buf).unwrap();
        assert_eq!(buf, [7, 1, 2, 3, 4, 7]);
        let mut on_disk = [0u8; 4];
        f.as_file().read_exact_at(&mut on_disk, 510).unwrap();
        assert_eq!(on_disk, [7; 4]);
        assert!(
            o.apply_first(|lba| if lba == 7 { 0 } else { 1 }, usize::MAX)
                .unwrap()
        );
        f.as_file().read_exact_at(&mut on_disk, 510).unwrap();
        assert_eq!(on_disk, [1, 2, 3, 4]);
        let mut last = [0u8; 512];
        f.as_file().read_exact_at(&mut last, 3584).unwrap();
        assert_eq!(last, [9; 512]);
        assert_eq!(o.dirty_sectors().count(), 0);
    }

    #[test]
    fn reads_stop_at_the_end_and_seeks_are_checked() {
        let (_f, mut o) = disk(1024);
        o.seek(SeekFrom::Start(1000)).unwrap();
        let mut buf = [0u8; 100];
        assert_eq!(o.read(&mut buf).unwrap(), 24);
        assert!(o.seek(SeekFrom::Current(-5000)).is_err());
    }
}
