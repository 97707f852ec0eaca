//! Small CoreOS-like live ISOs built with our own ISO 9660 writer, for tests, fixtures and the
//! benchmark. The payloads are stand-ins ("the kernel"), but every customization structure has
//! the shape of a real image of the layout chosen: `coreos/igninfo.json` naming a range inside a
//! bigger file (s390x), `igninfo.json` naming a whole file (x86_64 from 2023-03), no
//! `igninfo.json` (the legacy `/images/ignition.img`), with or without `coreos/kargs.json` and
//! its slots in the bootloader configs. That is all `coreos-installer iso ignition|kargs` needs
//! to accept the image. Padding to a large size streams zeros, so a multi-GiB image costs no memory.

use super::{IGNITION_AREA_LEN, LiveIsoError};
use iso9660::{IsoBuilder, IsoError, WriteOptions};
use serde_json::json;
use std::io::{self, Write};

/// Volume label; as on real images it also appears in the default kargs.
pub(crate) const VOLUME_ID: &str = "fedora-coreos-ibi-synthetic";
/// The pristine kargs of every synthetic image, FCOS-shaped.
pub(crate) const DEFAULT_KARGS: &str = "mitigations=auto,nosmt coreos.liveiso=fedora-coreos-ibi-synthetic ignition.firstboot ignition.platform.id=metal";
/// Slot sizes of the real x86_64 and s390x images.
const X86_SLOT_SIZE: usize = 1139;
const S390X_SLOT_SIZE: usize = 896;
/// The s390x layout: parmfile slot and Ignition area inside `images/cdboot.img`, as in
/// fedora-coreos 38; unlike the real image the file goes on after the area, so a write that
/// strays past it shows.
const CDBOOT_KARGS_OFFSET: usize = 66_688;
const CDBOOT_AREA_OFFSET: usize = 132_096;
const CDBOOT_TAIL: usize = 4096;
/// Follows each x86 slot, turning the rest of the line into a comment in GRUB and isolinux.
const KARG_MARKER: &str = "# COREOS_KARG_EMBED_AREA";
/// 2023-07-18, the date of the newest upstream fixture; any fixed value keeps builds reproducible.
const TIMESTAMP: i64 = 1_689_638_400;
const PAD_CHUNK: usize = 1 << 20;
/// Mode of every file in the image.
const MODE: u32 = 0o644;
/// The bootloader configs around the slot, shaped like cosa's.
const GRUB_HEAD: &str = concat!(
    "set timeout=1\n",
    "menuentry 'Fedora CoreOS (Live)' --class fedora --class gnu-linux --class os {\n",
    "\tlinux /images/pxeboot/vmlinuz "
);
const GRUB_TAIL: &str = "\n\tinitrd /images/pxeboot/initrd.img /images/ignition.img\n}\n";
const ISOLINUX_HEAD: &str = concat!(
    "default linux\nlabel linux\n  menu label ^Fedora CoreOS (Live)\n",
    "  kernel /images/pxeboot/vmlinuz\n",
    "  append initrd=/images/pxeboot/initrd.img,/images/ignition.img "
);

/// Where the Ignition area is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IgnitionLayout {
    /// `igninfo.json` with `offset` and `length` inside `images/cdboot.img` (s390x).
    InsideFile,
    /// `igninfo.json` naming the whole `images/ignition.img` (x86_64 from 2023-03).
    WholeFile,
    /// No `igninfo.json`: the whole `images/ignition.img` by convention (before 2023-03).
    Legacy,
}

/// What to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntheticIso {
    pub layout: IgnitionLayout,
    /// Write `coreos/kargs.json` and its slots; without it the kargs are fixed.
    pub kargs: bool,
    /// Zero-fill the file to this many bytes past the ISO volume, as cosa's fixtures do; for
    /// benchmark-sized images. Smaller values change nothing.
    pub pad_to: Option<u64>,
    /// The ISO 9660 volume ID, also the `coreos.liveiso=` karg: [`VOLUME_ID`], or an OS's own
    /// (`rhcos-10.2.20260715-0`: see [`SyntheticIso::rhcos`]).
    pub volume_id: String,
}

impl SyntheticIso {
    pub fn new(layout: IgnitionLayout, kargs: bool) -> Self {
        Self {
            layout,
            kargs,
            pad_to: None,
            volume_id: VOLUME_ID.to_string(),
        }
    }

    /// An RHCOS-shaped image of `release` (`10.2.20260715-0`, `9.8.20260428-0`): coreos-assembler
    /// names the volume `rhcos-<release>`, which is how a reader tells RHEL 10 from RHEL 9.
    pub fn rhcos(layout: IgnitionLayout, kargs: bool, release: &str) -> Self {
        Self {
            volume_id: format!("rhcos-{release}"),
            ..Self::new(layout, kargs)
        }
    }

    /// The pristine kargs: [`DEFAULT_KARGS`] with this image's volume ID.
    pub(crate) fn default_kargs(&self) -> String {
        DEFAULT_KARGS.replace(VOLUME_ID, &self.volume_id)
    }

    /// Every layout, with and without kargs.
    pub fn all() -> Vec<Self> {
        use IgnitionLayout::*;
        [InsideFile, WholeFile, Legacy]
            .into_iter()
            .flat_map(|l| [Self::new(l, true), Self::new(l, false)])
            .collect()
    }

    /// A short name for test output ("inside-file+kargs").
    pub fn name(&self) -> String {
        let layout = match self.layout {
            IgnitionLayout::InsideFile => "inside-file",
            IgnitionLayout::WholeFile => "whole-file",
            IgnitionLayout::Legacy => "legacy",
        };
        format!("{layout}{}", if self.kargs { "+kargs" } else { "" })
    }

    /// The image tree.
    pub fn builder(&self) -> Result<IsoBuilder, IsoError> {
        let mut b = IsoBuilder::new();
        b.add_file("coreos/features.json", features(), MODE)?;
        for (name, data) in [
            ("vmlinuz", "the kernel"),
            ("initrd.img", "initrd data"),
            ("rootfs.img", "rootfs data"),
        ] {
            b.add_file(
                &format!("images/pxeboot/{name}"),
                data.as_bytes().to_vec(),
                MODE,
            )?;
        }
        match self.layout {
            IgnitionLayout::InsideFile => self.add_s390x(&mut b)?,
            IgnitionLayout::WholeFile | IgnitionLayout::Legacy => self.add_x86(&mut b)?,
        }
        Ok(b)
    }

    /// Writes the image (and any padding) to `out`; returns the number of bytes written.
    pub fn write<W: Write>(&self, out: W) -> Result<u64, LiveIsoError> {
        let mut out = Counter {
            inner: out,
            count: 0,
        };
        let opts = WriteOptions {
            volume_id: self.volume_id.clone(),
            timestamp: TIMESTAMP,
        };
        self.builder()?.write(&opts, &mut out)?;
        let zeros = vec![0u8; PAD_CHUNK];
        while let Some(left) = self
            .pad_to
            .and_then(|n| n.checked_sub(out.count))
            .filter(|&n| n > 0)
        {
            out.write_all(&zeros[..left.min(PAD_CHUNK as u64) as usize])?;
        }
        out.flush()?;
        Ok(out.count)
    }

    /// The image in memory; for small images in tests.
    pub fn to_vec(&self) -> Result<Vec<u8>, LiveIsoError> {
        let mut out = Vec::new();
        self.write(&mut out)?;
        Ok(out)
    }

    /// s390x: one boot image holding the parmfile slot and the Ignition area.
    fn add_s390x(&self, b: &mut IsoBuilder) -> Result<(), IsoError> {
        let len = CDBOOT_AREA_OFFSET + IGNITION_AREA_LEN as usize + CDBOOT_TAIL;
        let mut img: Vec<u8> = (0..len).map(|i| (i % 255 + 1) as u8).collect();
        let head = b"synthetic s390x boot image: kernel, initramfs and parmfile stand-ins\n";
        img[..head.len()].copy_from_slice(head);
        img[CDBOOT_AREA_OFFSET..CDBOOT_AREA_OFFSET + IGNITION_AREA_LEN as usize].fill(0);
        if self.kargs {
            let slot = slot_bytes(&self.default_kargs(), S390X_SLOT_SIZE, 0, 0);
            img[CDBOOT_KARGS_OFFSET..CDBOOT_KARGS_OFFSET + slot.len()].copy_from_slice(&slot);
            let kargs = kargs_json(
                &self.default_kargs(),
                S390X_SLOT_SIZE,
                &[("images/cdboot.img", CDBOOT_KARGS_OFFSET, Some(("\0", "\0")))],
            );
            b.add_file("coreos/kargs.json", kargs, MODE)?;
        }
        b.add_file("images/cdboot.img", img, MODE)?;
        let info = json!({
            "file": "images/cdboot.img",
            "length": IGNITION_AREA_LEN,
            "offset": CDBOOT_AREA_OFFSET,
        });
        b.add_file("coreos/igninfo.json", json_bytes(&info), MODE)
    }

    /// x86_64: `images/ignition.img` plus GRUB and isolinux configs with one slot each.
    fn add_x86(&self, b: &mut IsoBuilder) -> Result<(), IsoError> {
        b.add_file(
            "images/ignition.img",
            vec![0; IGNITION_AREA_LEN as usize],
            MODE,
        )?;
        if self.layout == IgnitionLayout::WholeFile {
            let info = json!({"file": "images/ignition.img"});
            b.add_file("coreos/igninfo.json", json_bytes(&info), MODE)?;
        }
        let (grub_cfg, grub_at) = self.boot_config(GRUB_HEAD, GRUB_TAIL);
        let (isolinux_cfg, isolinux_at) = self.boot_config(ISOLINUX_HEAD, "\n");
        b.add_file("EFI/fedora/grub.cfg", grub_cfg, MODE)?;
        b.add_file("isolinux/isolinux.cfg", isolinux_cfg, MODE)?;
        if !self.kargs {
            return Ok(());
        }
        // The legacy layout leaves pad and end out, as cosa did before 2023-07.
        let fill = (self.layout == IgnitionLayout::WholeFile).then_some(("#", "\n"));
        let files = [
            ("EFI/fedora/grub.cfg", grub_at, fill),
            ("isolinux/isolinux.cfg", isolinux_at, fill),
        ];
        b.add_file(
            "coreos/kargs.json",
            kargs_json(&self.default_kargs(), X86_SLOT_SIZE, &files),
            MODE,
        )
    }

    /// A bootloader config: `head`, then the slot and its marker (or the fixed kargs), then
    /// `tail`. Returns the bytes and the slot's offset in them.
    fn boot_config(&self, head: &str, tail: &str) -> (Vec<u8>, usize) {
        let mut out = head.as_bytes().to_vec();
        if self.kargs {
            out.extend(slot_bytes(
                &self.default_kargs(),
                X86_SLOT_SIZE,
                b'\n',
                b'#',
            ));
            out.extend_from_slice(KARG_MARKER.as_bytes());
        } else {
            out.extend_from_slice(self.default_kargs().as_bytes());
        }
        out.extend_from_slice(tail.as_bytes());
        (out, head.len())
    }
}

/// A pristine slot: the default kargs, the end byte, padding.
fn slot_bytes(kargs: &str, size: usize, end: u8, pad: u8) -> Vec<u8> {
    let mut slot = kargs.as_bytes().to_vec();
    slot.push(end);
    slot.resize(size, pad);
    slot
}

/// One kargs.json entry: path, offset in it, and (pad, end) when spelled out.
type SlotSpec<'a> = (&'a str, usize, Option<(&'a str, &'a str)>);

/// `coreos/kargs.json` with one entry per slot.
fn kargs_json(kargs: &str, size: usize, files: &[SlotSpec<'_>]) -> Vec<u8> {
    let files: Vec<serde_json::Value> = files
        .iter()
        .map(|&(path, offset, fill)| match fill {
            Some((pad, end)) => json!({"path": path, "offset": offset, "pad": pad, "end": end}),
            None => json!({"path": path, "offset": offset}),
        })
        .collect();
    json_bytes(&json!({"default": kargs, "files": files, "size": size}))
}

fn features() -> Vec<u8> {
    json_bytes(&json!({"installer-config": true, "live-initrd-network": true}))
}

fn json_bytes(value: &serde_json::Value) -> Vec<u8> {
    let mut out = value.to_string().into_bytes();
    out.push(b'\n');
    out
}

/// Counts bytes on the way through, so padding knows where the volume ended.
struct Counter<W> {
    inner: W,
    count: u64,
}

impl<W: Write> Write for Counter<W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.count += n as u64;
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

#[cfg(test)]
mod tests;
