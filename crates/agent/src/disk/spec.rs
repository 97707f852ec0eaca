//! Where partitions go, as pure arithmetic: the `extraPartitionStart` grammar and the range of the
//! extra partition on a given disk and table, and the plan for growing the root partition. No I/O:
//! every case is a table-driven unit test.

use anyhow::{Result, anyhow, bail};
use thiserror::Error;

use super::{MIB, PartitionInfo, TableLayout};

/// Where the extra partition starts, as the configuration says it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StartSpec {
    /// `0`: right after the last partition.
    AfterLast,
    /// `+10M`, `2048K`: this many bytes from the start of the disk.
    OffsetBytes(u64),
    /// A bare positive number: sectors from the start of the disk, as sfdisk's `start=` reads it
    /// (lca-cli passes positive values to sfdisk verbatim).
    OffsetSectors(u64),
    /// `-40G`: a partition of this many bytes at the end of the disk.
    SizeAtEnd(u64),
}

/// Why a partition range cannot be placed. The caller adds the disk's path.
#[derive(Debug, Error, PartialEq, Eq)]
pub(crate) enum RangeError {
    #[error("unsupported sector size {0} (expected 512 or 4096)")]
    SectorSize(u64),
    #[error("the disk ({disk_bytes} bytes) is too small for a partition table")]
    DiskTooSmall { disk_bytes: u64 },
    #[error(
        "the disk ({disk_bytes} bytes) is too small for a {size}-byte partition at its end \
         (needs the start at LBA {first_usable} or later)"
    )]
    TooBigForDisk {
        disk_bytes: u64,
        size: u64,
        first_usable: u64,
    },
    #[error(
        "the partition would start at LBA {start}, outside the usable area \
         (LBAs {first_usable}-{last_usable})"
    )]
    OutsideUsable {
        start: u64,
        first_usable: u64,
        last_usable: u64,
    },
    #[error("LBAs {first}-{last} overlap {existing}")]
    Overlap {
        first: u64,
        last: u64,
        existing: PartitionInfo,
    },
    #[error("partition {0} does not exist")]
    NoSuchPartition(u32),
    #[error("{part} cannot shrink to end at LBA {up_to}")]
    WouldShrink { part: PartitionInfo, up_to: u64 },
}

/// Parses `extraPartitionStart`: `0`, or an optionally signed number with an optional binary unit.
/// The installer accepts `0` or `[+-]?<digits>[KMGTP]`; lca-cli's size grammar additionally takes
/// decimals, a `B`/`iB` suffix, lower case and a bare byte count for negative values.
pub fn parse_partition_start(s: &str) -> Result<StartSpec> {
    let t = s.trim();
    if t == "0" {
        return Ok(StartSpec::AfterLast);
    }
    let (negative, rest) = match t.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    let bad = || {
        anyhow!(
            "invalid partition start {s:?}: expected \"0\" or [+-]<number>[K|M|G|T|P], like -40G"
        )
    };
    let (number, unit) = split_unit(rest).ok_or_else(bad)?;
    if !negative && unit.is_none() {
        return number
            .parse::<u64>()
            .map(StartSpec::OffsetSectors)
            .map_err(|_| bad());
    }
    let bytes = scale(number, unit.unwrap_or(1)).ok_or_else(bad)?;
    if !negative {
        return Ok(StartSpec::OffsetBytes(bytes));
    }
    if bytes == 0 {
        bail!("invalid partition start {s:?}: the size at the end of the disk is zero");
    }
    Ok(StartSpec::SizeAtEnd(bytes))
}

/// Splits `1.5 GiB` into (`1.5`, Some(1024³)); `512` into (`512`, None).
fn split_unit(s: &str) -> Option<(&str, Option<u64>)> {
    let end = s
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(s.len());
    let (number, suffix) = (&s[..end], s[end..].trim_start());
    if number.is_empty() {
        return None;
    }
    let upper = suffix.to_ascii_uppercase();
    let letter = match upper.as_str() {
        "" => return Some((number, None)),
        "B" => return Some((number, Some(1))),
        u => u.strip_suffix("IB").or(u.strip_suffix('B')).unwrap_or(u),
    };
    let power = match letter {
        "K" => 1,
        "M" => 2,
        "G" => 3,
        "T" => 4,
        "P" => 5,
        _ => return None,
    };
    Some((number, Some(1024u64.pow(power))))
}

/// `number` (digits, optionally `.digits`) × `mult`, rounded down; None on overflow or bad syntax.
fn scale(number: &str, mult: u64) -> Option<u64> {
    let (int, frac) = number.split_once('.').unwrap_or((number, ""));
    if int.is_empty() || (number.contains('.') && frac.is_empty()) || frac.contains('.') {
        return None;
    }
    let whole = int.parse::<u64>().ok()?.checked_mul(mult)?;
    if frac.is_empty() {
        return Some(whole);
    }
    let digits = u32::try_from(frac.len()).ok().filter(|d| *d <= 18)?;
    let f = u128::from(frac.parse::<u64>().ok()?);
    let part = f * u128::from(mult) / 10u128.pow(digits);
    whole.checked_add(u64::try_from(part).ok()?)
}

/// The LBA range `(first, last)` of the extra partition on a disk of `disk_bytes` with `table`
/// (which must not contain the extra partition itself). Starts are aligned to 1 MiB: down for a
/// size at the end (as lca-cli does), up otherwise; the partition runs to the last usable LBA.
pub(crate) fn extra_partition_range(
    disk_bytes: u64,
    sector_size: u64,
    table: &TableLayout,
    spec: StartSpec,
) -> Result<(u64, u64), RangeError> {
    if sector_size != 512 && sector_size != 4096 {
        return Err(RangeError::SectorSize(sector_size));
    }
    let align = MIB / sector_size;
    let last_usable = table
        .last_usable_lba(disk_bytes, sector_size)
        .filter(|l| *l >= table.first_usable_lba)
        .ok_or(RangeError::DiskTooSmall { disk_bytes })?;
    let start = start_lba(disk_bytes, sector_size, table, spec, align)?;
    if start < table.first_usable_lba || start > last_usable {
        return Err(RangeError::OutsideUsable {
            start,
            first_usable: table.first_usable_lba,
            last_usable,
        });
    }
    check_overlap(table, start, last_usable, None)?;
    Ok((start, last_usable))
}

/// The unchecked start LBA for `spec`.
fn start_lba(
    disk_bytes: u64,
    sector_size: u64,
    table: &TableLayout,
    spec: StartSpec,
    align: u64,
) -> Result<u64, RangeError> {
    let up = |lba: u64| lba.div_ceil(align).saturating_mul(align);
    Ok(match spec {
        StartSpec::SizeAtEnd(size) => {
            let bytes = disk_bytes
                .checked_sub(size)
                .ok_or(RangeError::TooBigForDisk {
                    disk_bytes,
                    size,
                    first_usable: table.first_usable_lba,
                })?;
            bytes / sector_size / align * align
        }
        StartSpec::OffsetBytes(bytes) => up(bytes.div_ceil(sector_size)),
        StartSpec::OffsetSectors(sectors) => up(sectors),
        StartSpec::AfterLast => up(table
            .partitions
            .iter()
            .map(|p| p.last_lba + 1)
            .max()
            .unwrap_or(table.first_usable_lba)),
    })
}

/// Fails when `first..=last` overlaps a partition of `table` other than `skip`.
fn check_overlap(
    table: &TableLayout,
    first: u64,
    last: u64,
    skip: Option<u32>,
) -> Result<(), RangeError> {
    match table
        .partitions
        .iter()
        .filter(|p| Some(p.number) != skip)
        .find(|p| p.first_lba <= last && p.last_lba >= first)
    {
        Some(p) => Err(RangeError::Overlap {
            first,
            last,
            existing: p.clone(),
        }),
        None => Ok(()),
    }
}

/// What growing a partition to end at a given LBA amounts to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum GrowPlan {
    /// It already ends there.
    AlreadyGrown(PartitionInfo),
    /// Move its last LBA from the current one to `new_last`.
    Grow { part: PartitionInfo, new_last: u64 },
}

/// Plans growing partition `number` of `table` to end at `up_to_lba` on a disk of `disk_bytes`.
pub(crate) fn grow_plan(
    disk_bytes: u64,
    table: &TableLayout,
    number: u32,
    up_to_lba: u64,
) -> Result<GrowPlan, RangeError> {
    let part = table
        .get(number)
        .ok_or(RangeError::NoSuchPartition(number))?
        .clone();
    if up_to_lba == part.last_lba {
        return Ok(GrowPlan::AlreadyGrown(part));
    }
    if up_to_lba < part.last_lba {
        return Err(RangeError::WouldShrink {
            part,
            up_to: up_to_lba,
        });
    }
    let last_usable = table
        .last_usable_lba(disk_bytes, part.sector_size)
        .ok_or(RangeError::DiskTooSmall { disk_bytes })?;
    if up_to_lba > last_usable {
        return Err(RangeError::OutsideUsable {
            start: up_to_lba,
            first_usable: table.first_usable_lba,
            last_usable,
        });
    }
    check_overlap(table, part.last_lba + 1, up_to_lba, Some(number))?;
    Ok(GrowPlan::Grow {
        part,
        new_last: up_to_lba,
    })
}

#[cfg(test)]
mod tests;
