//! Table-driven tests of the start grammar and the range arithmetic.

use super::*;

const KIB: u64 = 1024;
const GIB: u64 = 1024 * MIB;

fn part(number: u32, name: &str, first: u64, last: u64, sector_size: u64) -> PartitionInfo {
    PartitionInfo {
        number,
        first_lba: first,
        last_lba: last,
        sector_size,
        name: name.to_string(),
    }
}

/// A small RHCOS metal layout on 512-byte sectors whose root ends at `root_last`.
fn rhcos(root_last: u64) -> TableLayout {
    TableLayout {
        first_usable_lba: 34,
        entry_array_bytes: 128 * 128,
        partitions: vec![
            part(1, "BIOS-BOOT", 2048, 4095, 512),
            part(2, "EFI-SYSTEM", 4096, 264_191, 512),
            part(3, "boot", 264_192, 1_050_623, 512),
            part(4, "root", 1_050_624, root_last, 512),
        ],
    }
}

fn empty(sector_size: u64) -> TableLayout {
    TableLayout {
        first_usable_lba: 2 + 16 * KIB / sector_size,
        entry_array_bytes: 128 * 128,
        partitions: vec![],
    }
}

#[test]
fn parses_start_specs() {
    let ok = [
        ("0", StartSpec::AfterLast),
        ("-40G", StartSpec::SizeAtEnd(40 * GIB)),
        ("+10M", StartSpec::OffsetBytes(10 * MIB)),
        ("2048K", StartSpec::OffsetBytes(2 * MIB)),
        ("+1T", StartSpec::OffsetBytes(1024 * GIB)),
        ("-1P", StartSpec::SizeAtEnd(1024 * 1024 * GIB)),
        ("-40GB", StartSpec::SizeAtEnd(40 * GIB)),
        ("-40g", StartSpec::SizeAtEnd(40 * GIB)),
        ("-40 GiB", StartSpec::SizeAtEnd(40 * GIB)),
        ("-1.5G", StartSpec::SizeAtEnd(3 * GIB / 2)),
        ("-0.1K", StartSpec::SizeAtEnd(102)),
        ("-1024", StartSpec::SizeAtEnd(1024)),
        ("-1024B", StartSpec::SizeAtEnd(1024)),
        ("2048", StartSpec::OffsetSectors(2048)),
        ("+2048", StartSpec::OffsetSectors(2048)),
        (" -1M ", StartSpec::SizeAtEnd(MIB)),
    ];
    for (input, want) in ok {
        assert_eq!(parse_partition_start(input).unwrap(), want, "{input:?}");
    }
}

#[test]
fn rejects_bad_start_specs() {
    let bad = [
        "",
        "-",
        "+",
        "abc",
        "-40X",
        "-40GG",
        "--4G",
        "+-4G",
        "-1.2.3G",
        "-.5G",
        "-5.G",
        "G",
        "-18446744073709551615G",
        "1e3",
    ];
    for input in bad {
        let err = parse_partition_start(input).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "invalid partition start {input:?}: expected \"0\" or [+-]<number>[K|M|G|T|P], \
                 like -40G"
            ),
        );
    }
    assert_eq!(
        parse_partition_start("-0").unwrap_err().to_string(),
        "invalid partition start \"-0\": the size at the end of the disk is zero"
    );
}

#[test]
fn places_extra_partition() {
    // (disk bytes, sector size, table, spec, expected range)
    let cases = [
        // -512M on a 2 GiB disk: 3/4 of the way, already MiB-aligned; runs to the last usable LBA.
        (
            2 * GIB,
            512,
            rhcos(2_097_151),
            StartSpec::SizeAtEnd(512 * MIB),
            (3_145_728, 4_194_270),
        ),
        // A disk size that is no MiB multiple: the start is aligned down, the end follows the disk.
        (
            2 * GIB + 12345,
            512,
            rhcos(2_097_151),
            StartSpec::SizeAtEnd(512 * MIB),
            (3_145_728, 4_194_294),
        ),
        // -40G on a 120 GiB disk.
        (
            120 * GIB,
            512,
            rhcos(2_097_151),
            StartSpec::SizeAtEnd(40 * GIB),
            (167_772_160, 251_658_206),
        ),
        // 4Kn: 1 MiB is 256 sectors; the entry array takes 4 sectors.
        (
            2 * GIB,
            4096,
            empty(4096),
            StartSpec::SizeAtEnd(512 * MIB),
            (393_216, 524_282),
        ),
        // Odd sizes align down to the MiB below.
        (
            2 * GIB,
            512,
            rhcos(2_097_151),
            StartSpec::SizeAtEnd(300 * MIB + 1),
            (3_577_856, 4_194_270),
        ),
        // 0: right after root, aligned up.
        (
            2 * GIB,
            512,
            rhcos(2_097_151),
            StartSpec::AfterLast,
            (2_097_152, 4_194_270),
        ),
        (
            2 * GIB,
            512,
            rhcos(2_097_000),
            StartSpec::AfterLast,
            (2_097_152, 4_194_270),
        ),
        (
            2 * GIB,
            512,
            empty(512),
            StartSpec::AfterLast,
            (2048, 4_194_270),
        ),
        (
            2 * GIB,
            4096,
            empty(4096),
            StartSpec::AfterLast,
            (256, 524_282),
        ),
        // Offsets from the start of the disk, aligned up.
        (
            2 * GIB,
            512,
            empty(512),
            StartSpec::OffsetBytes(10 * MIB),
            (20_480, 4_194_270),
        ),
        (
            2 * GIB,
            512,
            empty(512),
            StartSpec::OffsetBytes(10 * MIB + 1),
            (22_528, 4_194_270),
        ),
        (
            2 * GIB,
            512,
            rhcos(2_097_151),
            StartSpec::OffsetBytes(GIB),
            (2_097_152, 4_194_270),
        ),
        (
            2 * GIB,
            512,
            empty(512),
            StartSpec::OffsetSectors(2048),
            (2048, 4_194_270),
        ),
        (
            2 * GIB,
            512,
            empty(512),
            StartSpec::OffsetSectors(2049),
            (4096, 4_194_270),
        ),
    ];
    for (disk, ss, table, spec, want) in cases {
        assert_eq!(
            extra_partition_range(disk, ss, &table, spec),
            Ok(want),
            "{disk} {ss} {spec:?}"
        );
        assert_eq!(want.0 % (MIB / ss), 0);
    }
}

#[test]
fn range_errors_carry_the_numbers() {
    let t = rhcos(2_097_151);
    let cases = [
        (
            2 * GIB,
            512,
            StartSpec::SizeAtEnd(3 * GIB),
            "the disk (2147483648 bytes) is too small for a 3221225472-byte partition at its end \
          (needs the start at LBA 34 or later)",
        ),
        (
            2 * GIB,
            512,
            StartSpec::SizeAtEnd(3 * GIB / 2),
            "LBAs 1048576-4194270 overlap partition 3 (\"boot\", LBAs 264192-1050623)",
        ),
        (
            2 * GIB,
            512,
            StartSpec::OffsetBytes(GIB - MIB),
            "LBAs 2095104-4194270 overlap partition 4 (\"root\", LBAs 1050624-2097151)",
        ),
        (
            2 * GIB,
            512,
            StartSpec::OffsetBytes(2 * GIB),
            "the partition would start at LBA 4194304, outside the usable area (LBAs 34-4194270)",
        ),
        (
            2 * GIB,
            512,
            StartSpec::OffsetSectors(0),
            "the partition would start at LBA 0, outside the usable area (LBAs 34-4194270)",
        ),
        (
            16 * KIB,
            512,
            StartSpec::AfterLast,
            "the disk (16384 bytes) is too small for a partition table",
        ),
        (
            2 * GIB,
            1024,
            StartSpec::AfterLast,
            "unsupported sector size 1024 (expected 512 or 4096)",
        ),
    ];
    for (disk, ss, spec, want) in cases {
        let err = extra_partition_range(disk, ss, &t, spec).unwrap_err();
        assert_eq!(err.to_string(), want, "{spec:?}");
    }
    let full = rhcos(4_194_270);
    let err = extra_partition_range(2 * GIB, 512, &full, StartSpec::AfterLast).unwrap_err();
    assert_eq!(
        err.to_string(),
        "the partition would start at LBA 4194304, outside the usable area (LBAs 34-4194270)"
    );
}

#[test]
fn plans_root_growth() {
    let mut t = rhcos(2_097_151);
    t.partitions
        .push(part(5, "var-lib-containers", 3_145_728, 4_194_270, 512));
    let root = t.get(4).unwrap().clone();
    assert_eq!(
        grow_plan(2 * GIB, &t, 4, 3_145_727),
        Ok(GrowPlan::Grow {
            part: root.clone(),
            new_last: 3_145_727
        })
    );
    assert_eq!(
        grow_plan(2 * GIB, &t, 4, 2_097_151),
        Ok(GrowPlan::AlreadyGrown(root))
    );
    let errors = [
        (
            4,
            3_145_728,
            "LBAs 2097152-3145728 overlap partition 5 (\"var-lib-containers\", LBAs 3145728-4194270)",
        ),
        (
            4,
            2_000_000,
            "partition 4 (\"root\", LBAs 1050624-2097151) cannot shrink to end at LBA 2000000",
        ),
        (6, 3_000_000, "partition 6 does not exist"),
        (
            5,
            4_194_271,
            "the partition would start at LBA 4194271, outside the usable area (LBAs 34-4194270)",
        ),
    ];
    for (number, up_to, want) in errors {
        let err = grow_plan(2 * GIB, &t, number, up_to).unwrap_err();
        assert_eq!(err.to_string(), want);
    }
}

#[test]
fn last_usable_follows_the_disk_not_the_header() {
    let t = empty(512);
    assert_eq!(t.last_usable_lba(GIB, 512), Some(2_097_118));
    assert_eq!(t.last_usable_lba(GIB + 511, 512), Some(2_097_118));
    assert_eq!(t.last_usable_lba(512, 512), None);
}
