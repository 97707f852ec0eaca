//! Filesystem labels read straight from a device's first bytes, without udev or blkid: the
//! installed host may have neither running this early, and the configuration device only needs
//! its volume name recognised. Pure parsers over a byte buffer; the caller does the reading.

/// Bytes a probe reads from the start of a device: the ISO 9660 volume descriptor set starts at
/// 32 KiB; eight descriptors cover the PVD plus boot, supplementary and terminator records.
pub(crate) const PROBE_LEN: usize = ISO_VD_START + ISO_MAX_DESCRIPTORS * ISO_SECTOR;

const ISO_VD_START: usize = 16 * ISO_SECTOR;
const ISO_SECTOR: usize = 2048;
const ISO_MAX_DESCRIPTORS: usize = 8;
/// ECMA-119 8.4: type 1 (primary), "CD001", volume identifier at 40..72, space padded.
const ISO_TYPE_PRIMARY: u8 = 1;
const ISO_TYPE_TERMINATOR: u8 = 255;
const ISO_STANDARD_ID: &[u8] = b"CD001";
const ISO_VOLUME_ID: std::ops::Range<usize> = 40..72;

/// ext2/3/4 superblock at 1 KiB: `s_magic` (LE 0xEF53) at +56, `s_volume_name[16]` at +120.
const EXT_SUPERBLOCK: usize = 1024;
const EXT_MAGIC_OFFSET: usize = 56;
const EXT_MAGIC: u16 = 0xEF53;
const EXT_VOLUME_NAME: std::ops::Range<usize> = 120..136;

/// XFS superblock at 0: "XFSB", `sb_fname[12]` at 108. A 12-byte label cannot hold
/// `cluster-config`; XFS is recognised so a mislabelled device is reported, not silently ignored.
const XFS_MAGIC: &[u8] = b"XFSB";
const XFS_FNAME: std::ops::Range<usize> = 108..120;

/// Filesystems whose label we can read. FAT is left out on purpose: its 11-byte label cannot hold
/// `cluster-config` or `relocation-config`, so no FAT device can ever match.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FsKind {
    Iso9660,
    Ext,
    Xfs,
}

impl FsKind {
    /// The `mount -t` type; the ext4 driver mounts ext2 and ext3 too.
    pub(crate) fn mount_type(self) -> &'static str {
        match self {
            FsKind::Iso9660 => "iso9660",
            FsKind::Ext => "ext4",
            FsKind::Xfs => "xfs",
        }
    }
}

/// A recognised filesystem and its label (padding removed, case kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Probe {
    pub(crate) kind: FsKind,
    pub(crate) label: String,
}

/// Recognises the filesystem at the start of `head` (up to [`PROBE_LEN`] bytes of a device).
/// ISO 9660 comes first: an ISO written to a disk may carry leftovers of other superblocks below
/// 32 KiB, while the volume descriptors are unambiguous.
pub(crate) fn parse_label(head: &[u8]) -> Option<Probe> {
    let found = [
        (
            FsKind::Iso9660,
            iso9660_label as fn(&[u8]) -> Option<String>,
        ),
        (FsKind::Ext, ext_label),
        (FsKind::Xfs, xfs_label),
    ];
    found
        .into_iter()
        .find_map(|(kind, parse)| parse(head).map(|label| Probe { kind, label }))
}

/// The Primary Volume Descriptor's volume identifier, trailing spaces (and NULs) trimmed.
pub(crate) fn iso9660_label(head: &[u8]) -> Option<String> {
    for i in 0..ISO_MAX_DESCRIPTORS {
        let start = ISO_VD_START + i * ISO_SECTOR;
        let vd = head.get(start..start + ISO_SECTOR)?;
        if vd.get(1..6)? != ISO_STANDARD_ID {
            return None;
        }
        match vd[0] {
            ISO_TYPE_PRIMARY => return Some(trim_label(&vd[ISO_VOLUME_ID])),
            ISO_TYPE_TERMINATOR => return None,
            _ => {}
        }
    }
    None
}

/// `s_volume_name` of an ext2/3/4 superblock, NUL padded.
pub(crate) fn ext_label(head: &[u8]) -> Option<String> {
    let sb = head.get(EXT_SUPERBLOCK..EXT_SUPERBLOCK + 1024)?;
    let magic = u16::from_le_bytes([sb[EXT_MAGIC_OFFSET], sb[EXT_MAGIC_OFFSET + 1]]);
    (magic == EXT_MAGIC).then(|| trim_label(&sb[EXT_VOLUME_NAME]))
}

/// `sb_fname` of an XFS superblock, NUL padded.
pub(crate) fn xfs_label(head: &[u8]) -> Option<String> {
    let fname = head.get(XFS_FNAME)?;
    (head.get(..4)? == XFS_MAGIC).then(|| trim_label(fname))
}

/// Cuts at the first NUL, then drops trailing spaces (ISO pads with spaces, ext and XFS with NULs).
fn trim_label(raw: &[u8]) -> String {
    let end = raw.iter().position(|&b| b == 0).unwrap_or(raw.len());
    String::from_utf8_lossy(&raw[..end])
        .trim_end_matches(' ')
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn iso_head(descriptors: &[(u8, &[u8])], volume_id: &[u8]) -> Vec<u8> {
        let mut head = vec![0u8; PROBE_LEN];
        for (i, (ty, id)) in descriptors.iter().enumerate() {
            let vd = &mut head[ISO_VD_START + i * ISO_SECTOR..][..ISO_SECTOR];
            vd[0] = *ty;
            vd[1..6].copy_from_slice(id);
            if *ty == ISO_TYPE_PRIMARY {
                vd[ISO_VOLUME_ID].fill(b' ');
                vd[40..40 + volume_id.len()].copy_from_slice(volume_id);
            }
        }
        head
    }

    fn ext_head(magic: u16, name: &[u8]) -> Vec<u8> {
        let mut head = vec![0u8; 4096];
        head[EXT_SUPERBLOCK + EXT_MAGIC_OFFSET..][..2].copy_from_slice(&magic.to_le_bytes());
        head[EXT_SUPERBLOCK + 120..][..name.len()].copy_from_slice(name);
        head
    }

    fn xfs_head(magic: &[u8], name: &[u8]) -> Vec<u8> {
        let mut head = vec![0u8; 4096];
        head[..4].copy_from_slice(magic);
        head[108..108 + name.len()].copy_from_slice(name);
        head
    }

    fn probe(kind: FsKind, label: &str) -> Option<Probe> {
        Some(Probe {
            kind,
            label: label.to_string(),
        })
    }

    #[test]
    fn recognises_each_filesystem_and_trims_padding() {
        let cases: Vec<(&str, Vec<u8>, Option<Probe>)> = vec![
            (
                "iso pvd first",
                iso_head(&[(1, b"CD001"), (255, b"CD001")], b"cluster-config"),
                probe(FsKind::Iso9660, "cluster-config"),
            ),
            (
                "iso after a boot record",
                iso_head(&[(0, b"CD001"), (1, b"CD001")], b"relocation-config"),
                probe(FsKind::Iso9660, "relocation-config"),
            ),
            (
                "iso full 32 bytes",
                iso_head(&[(1, b"CD001")], &[b'A'; 32]),
                probe(FsKind::Iso9660, &"A".repeat(32)),
            ),
            (
                "iso blank label",
                iso_head(&[(1, b"CD001")], b""),
                probe(FsKind::Iso9660, ""),
            ),
            (
                "ext4",
                ext_head(0xEF53, b"cluster-config"),
                probe(FsKind::Ext, "cluster-config"),
            ),
            (
                "ext4 full 16 bytes",
                ext_head(0xEF53, b"0123456789abcdef"),
                probe(FsKind::Ext, "0123456789abcdef"),
            ),
            (
                "xfs",
                xfs_head(b"XFSB", b"cfg-12chars!"),
                probe(FsKind::Xfs, "cfg-12chars!"),
            ),
            (
                "xfs short",
                xfs_head(b"XFSB", b"boot"),
                probe(FsKind::Xfs, "boot"),
            ),
        ];
        for (name, head, want) in cases {
            assert_eq!(parse_label(&head), want, "{name}");
        }
    }

    #[test]
    fn rejects_wrong_magic_and_short_buffers() {
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("zeros", vec![0u8; PROBE_LEN]),
            ("iso bad id", iso_head(&[(1, b"CD002")], b"cluster-config")),
            (
                "iso terminator first",
                iso_head(&[(255, b"CD001"), (1, b"CD001")], b"x"),
            ),
            (
                "iso truncated",
                iso_head(&[(1, b"CD001")], b"x")[..ISO_VD_START + 100].to_vec(),
            ),
            ("ext bad magic", ext_head(0xEF54, b"cluster-config")),
            (
                "ext truncated",
                ext_head(0xEF53, b"cluster-config")[..1500].to_vec(),
            ),
            ("xfs bad magic", xfs_head(b"XFSC", b"cluster")),
            (
                "xfs truncated",
                xfs_head(b"XFSB", b"cluster")[..100].to_vec(),
            ),
            ("empty", Vec::new()),
        ];
        for (name, head) in cases {
            assert_eq!(parse_label(&head), None, "{name}");
        }
    }

    #[test]
    fn iso_wins_over_a_stale_ext_superblock() {
        let mut head = iso_head(&[(1, b"CD001")], b"cluster-config");
        head[..4096].copy_from_slice(&ext_head(0xEF53, b"old-disk"));
        assert_eq!(parse_label(&head), probe(FsKind::Iso9660, "cluster-config"));
    }

    #[test]
    fn keeps_case_and_non_ascii_lossily() {
        assert_eq!(trim_label(b"Cluster-Config  \0\0"), "Cluster-Config");
        assert_eq!(trim_label(b"a\xffb"), "a\u{fffd}b");
        assert_eq!(trim_label(b"in side \0tail"), "in side");
    }
}
