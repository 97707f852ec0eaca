//! Byte-level ECMA-119 encodings shared by the writer and the reader: both-endian integers, the 7-byte
//! and 17-byte date forms, directory records and the fixed offsets of the volume descriptors. Nothing
//! here does I/O, so every encoding is unit-tested against hand-written bytes.

use super::{BLOCK_SIZE, IsoError};

/// "CD001": the standard identifier every volume descriptor carries at byte 1 (ECMA-119 8.1.2).
pub(crate) const STANDARD_ID: &[u8; 5] = b"CD001";
/// Volume descriptor type of the Primary Volume Descriptor (ECMA-119 8.4.1).
pub(crate) const VD_PRIMARY: u8 = 1;
/// Volume descriptor type of the Volume Descriptor Set Terminator (ECMA-119 8.3.1).
pub(crate) const VD_TERMINATOR: u8 = 255;
/// The first 16 sectors are the system area; descriptors start at sector 16 (ECMA-119 6.2.1).
pub(crate) const FIRST_VD_SECTOR: u64 = 16;
/// Byte offset of the 32-byte volume identifier inside the PVD (ECMA-119 8.4.6).
pub(crate) const PVD_VOLUME_ID: usize = 40;
/// Byte offset of the root directory record inside the PVD (ECMA-119 8.4.18).
pub(crate) const PVD_ROOT_RECORD: usize = 156;
/// Byte offset of the logical block size inside the PVD (ECMA-119 8.4.12).
pub(crate) const PVD_BLOCK_SIZE: usize = 128;
/// Fixed part of a directory record before the file identifier (ECMA-119 9.1).
pub(crate) const RECORD_HEADER: usize = 33;
/// A record's length byte caps it at 255; we keep it even, so 254 is the usable maximum.
pub(crate) const MAX_RECORD: usize = 254;
/// Directory record flag: the record describes a directory (ECMA-119 9.1.6, bit 1).
pub(crate) const FLAG_DIRECTORY: u8 = 0x02;
/// Directory record flag: more extents of this file follow (ECMA-119 9.1.6, bit 7).
pub(crate) const FLAG_MULTI_EXTENT: u8 = 0x80;

/// Writes `v` little-endian then big-endian (ECMA-119 7.2.3), 4 bytes.
pub(crate) fn put_u16_both(buf: &mut [u8], v: u16) {
    buf[..2].copy_from_slice(&v.to_le_bytes());
    buf[2..4].copy_from_slice(&v.to_be_bytes());
}

/// Writes `v` little-endian then big-endian (ECMA-119 7.3.3), 8 bytes.
pub(crate) fn put_u32_both(buf: &mut [u8], v: u32) {
    buf[..4].copy_from_slice(&v.to_le_bytes());
    buf[4..8].copy_from_slice(&v.to_be_bytes());
}

/// Reads the little-endian half of a both-endian u32. Real images disagree between halves often
/// enough (old mastering bugs) that trusting one half, as Linux does, is the robust choice.
pub(crate) fn get_u32_le(buf: &[u8], at: usize) -> Option<u32> {
    let b = buf.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

/// Reads a little-endian u16 at `at`, `None` when out of bounds.
pub(crate) fn get_u16_le(buf: &[u8], at: usize) -> Option<u16> {
    let b = buf.get(at..at.checked_add(2)?)?;
    Some(u16::from_le_bytes([b[0], b[1]]))
}

/// A broken-down UTC time; only the range both date forms can hold (1900..=2155) is ever built.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct DateTime {
    pub year: i64,
    pub month: u8,
    pub day: u8,
    pub hour: u8,
    pub minute: u8,
    pub second: u8,
}

impl DateTime {
    /// Converts unix seconds to a UTC civil date, rejecting years the 7-byte form cannot hold
    /// (it stores years since 1900 in one byte).
    pub(crate) fn from_unix(timestamp: i64) -> Result<Self, IsoError> {
        let days = timestamp.div_euclid(86_400);
        let secs = timestamp.rem_euclid(86_400);
        let (year, month, day) = civil_from_days(days);
        if !(1900..=2155).contains(&year) {
            return Err(IsoError::InvalidTimestamp {
                timestamp,
                reason: format!(
                    "year {year} is outside 1900..=2155, the range ISO 9660 dates can hold"
                ),
            });
        }
        Ok(Self {
            year,
            month,
            day,
            hour: (secs / 3600) as u8,
            minute: (secs / 60 % 60) as u8,
            second: (secs % 60) as u8,
        })
    }

    /// The 7-byte "recording date and time" of directory records and RRIP TF (ECMA-119 9.1.5);
    /// the last byte is the GMT offset in 15-minute units, always 0 because we write UTC.
    pub(crate) fn to_record_bytes(self) -> [u8; 7] {
        [
            (self.year - 1900) as u8,
            self.month,
            self.day,
            self.hour,
            self.minute,
            self.second,
            0,
        ]
    }

    /// The 17-byte "dec-datetime" of volume descriptors (ECMA-119 8.4.26.1): 16 ASCII digits
    /// (hundredths of a second are always 00) and a GMT offset byte.
    pub(crate) fn to_descriptor_bytes(self) -> [u8; 17] {
        let text = format!(
            "{:04}{:02}{:02}{:02}{:02}{:02}00",
            self.year, self.month, self.day, self.hour, self.minute, self.second
        );
        let mut out = [0u8; 17];
        out[..16].copy_from_slice(text.as_bytes());
        out
    }
}

/// Days since 1970-01-01 to (year, month, day) in the proleptic Gregorian calendar. Works in
/// 400-year eras (146097 days) so leap rules fall out of integer division; March-based years put
/// the leap day last, which keeps the month arithmetic linear.
fn civil_from_days(days: i64) -> (i64, u8, u8) {
    let shifted = days + 719_468; // days from 0000-03-01 to 1970-01-01
    let era = shifted.div_euclid(146_097);
    let day_of_era = shifted.rem_euclid(146_097);
    let year_of_era =
        (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_index = (5 * day_of_year + 2) / 153; // 0 = March
    let day = (day_of_year - (153 * month_index + 2) / 5 + 1) as u8;
    let month = if month_index < 10 {
        month_index + 3
    } else {
        month_index - 9
    } as u8;
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// The "unspecified" dec-datetime: sixteen '0' digits and a zero offset (ECMA-119 8.4.26.1).
pub(crate) fn unspecified_descriptor_date() -> [u8; 17] {
    let mut out = [b'0'; 17];
    out[16] = 0;
    out
}

/// Length of the file identifier padding byte: present when the identifier length is even, so the
/// system use area starts on an even offset (ECMA-119 9.1.12).
pub(crate) fn id_padding(id_len: usize) -> usize {
    usize::from(id_len.is_multiple_of(2))
}

/// Bytes a record uses before its system use area.
pub(crate) fn record_base_len(id_len: usize) -> usize {
    RECORD_HEADER + id_len + id_padding(id_len)
}

/// A directory record to encode. `su` is the complete system use area (already even-padded).
pub(crate) struct RecordOut<'a> {
    pub extent: u32,
    pub size: u32,
    pub date: [u8; 7],
    pub is_dir: bool,
    pub id: &'a [u8],
    pub su: &'a [u8],
}

impl RecordOut<'_> {
    /// Encoded length of this record.
    pub(crate) fn len(&self) -> usize {
        record_base_len(self.id.len()) + self.su.len()
    }

    /// Appends the ECMA-119 9.1 directory record. The planner guarantees `len() <= 254`; a record
    /// that would not fit is reported instead of truncated.
    pub(crate) fn encode(&self, out: &mut Vec<u8>) -> Result<(), IsoError> {
        let len = self.len();
        let len_byte = u8::try_from(len)
            .ok()
            .filter(|_| self.id.len() <= 255)
            .ok_or_else(|| IsoError::Malformed(format!("directory record of {len} bytes")))?;
        let start = out.len();
        out.resize(start + RECORD_HEADER, 0);
        let rec = &mut out[start..];
        rec[0] = len_byte;
        put_u32_both(&mut rec[2..10], self.extent);
        put_u32_both(&mut rec[10..18], self.size);
        rec[18..25].copy_from_slice(&self.date);
        rec[25] = if self.is_dir { FLAG_DIRECTORY } else { 0 };
        put_u16_both(&mut rec[28..32], 1); // volume sequence number: single-volume set
        rec[32] = self.id.len() as u8;
        out.extend_from_slice(self.id);
        out.resize(out.len() + id_padding(self.id.len()), 0);
        out.extend_from_slice(self.su);
        Ok(())
    }
}

/// A decoded directory record; owned so the reader can keep it after the sector buffer is gone.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct RecordIn {
    pub extent: u32,
    pub size: u32,
    pub flags: u8,
    pub id: Vec<u8>,
    pub su: Vec<u8>,
}

impl RecordIn {
    /// Parses one record from `rec`, which must be exactly the record's length-byte worth of bytes.
    pub(crate) fn parse(rec: &[u8]) -> Result<Self, IsoError> {
        let malformed = |what: &str| IsoError::Malformed(format!("directory record: {what}"));
        if rec.len() < RECORD_HEADER + 1 || usize::from(rec[0]) != rec.len() {
            return Err(malformed(
                "length byte is too small or disagrees with the record",
            ));
        }
        let id_len = usize::from(rec[32]);
        if id_len == 0 {
            return Err(malformed("empty file identifier"));
        }
        let su_start = record_base_len(id_len);
        let id = rec
            .get(RECORD_HEADER..RECORD_HEADER + id_len)
            .ok_or_else(|| malformed("file identifier runs past the record"))?;
        Ok(Self {
            extent: get_u32_le(rec, 2).ok_or_else(|| malformed("truncated extent"))?,
            size: get_u32_le(rec, 10).ok_or_else(|| malformed("truncated size"))?,
            flags: rec[25],
            id: id.to_vec(),
            su: rec.get(su_start..).unwrap_or_default().to_vec(),
        })
    }

    pub(crate) fn is_dir(&self) -> bool {
        self.flags & FLAG_DIRECTORY != 0
    }
}

/// Offsets of records packed into a directory so none straddles a sector (ECMA-119 6.8.1.1), and
/// the directory's size rounded up to whole sectors. Writer sizing and emission both use this, so
/// they cannot disagree.
pub(crate) fn pack_records(lens: impl IntoIterator<Item = usize>) -> (Vec<usize>, usize) {
    let mut offsets = Vec::new();
    let mut pos = 0usize;
    for len in lens {
        if pos % BLOCK_SIZE + len > BLOCK_SIZE {
            pos = pos.next_multiple_of(BLOCK_SIZE);
        }
        offsets.push(pos);
        pos += len;
    }
    (offsets, pos.next_multiple_of(BLOCK_SIZE).max(BLOCK_SIZE))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_endian_fields() {
        let cases: &[(u32, [u8; 8])] = &[
            (0, [0, 0, 0, 0, 0, 0, 0, 0]),
            (1, [1, 0, 0, 0, 0, 0, 0, 1]),
            (
                0x1234_5678,
                [0x78, 0x56, 0x34, 0x12, 0x12, 0x34, 0x56, 0x78],
            ),
            (u32::MAX, [0xff; 8]),
        ];
        for (v, want) in cases {
            let mut buf = [0u8; 8];
            put_u32_both(&mut buf, *v);
            assert_eq!(&buf, want, "u32 {v:#x}");
            assert_eq!(get_u32_le(&buf, 0), Some(*v));
        }
        let mut buf = [0u8; 4];
        put_u16_both(&mut buf, 0x0801);
        assert_eq!(buf, [0x01, 0x08, 0x08, 0x01]);
        assert_eq!(get_u16_le(&buf, 0), Some(0x0801));
        assert_eq!(get_u32_le(&buf, 1), None, "out of bounds read is None");
        assert_eq!(
            get_u32_le(&buf, usize::MAX),
            None,
            "overflowing offset is None"
        );
    }

    #[test]
    fn date_encoding() {
        let cases: &[(i64, [u8; 7], &str)] = &[
            (0, [70, 1, 1, 0, 0, 0, 0], "1970010100000000"),
            (951_782_400, [100, 2, 29, 0, 0, 0, 0], "2000022900000000"), // leap day, 400-year rule
            (
                1_700_000_000,
                [123, 11, 14, 22, 13, 20, 0],
                "2023111422132000",
            ),
            (
                1_709_251_199,
                [124, 2, 29, 23, 59, 59, 0],
                "2024022923595900",
            ),
            (-2_208_988_800, [0, 1, 1, 0, 0, 0, 0], "1900010100000000"),
            (
                5_869_583_999,
                [255, 12, 31, 23, 59, 59, 0],
                "2155123123595900",
            ),
        ];
        for (ts, record, descriptor) in cases {
            let dt = DateTime::from_unix(*ts).unwrap();
            assert_eq!(&dt.to_record_bytes(), record, "record date of {ts}");
            let d = dt.to_descriptor_bytes();
            assert_eq!(&d[..16], descriptor.as_bytes(), "descriptor date of {ts}");
            assert_eq!(d[16], 0, "UTC offset of {ts}");
        }
    }

    #[test]
    fn dates_outside_range_are_rejected() {
        for ts in [-2_208_988_801, 5_869_584_000, i64::MIN, i64::MAX] {
            let err = DateTime::from_unix(ts).unwrap_err();
            assert!(err.to_string().contains(&ts.to_string()), "{err}");
        }
    }

    #[test]
    fn record_round_trip() {
        let rec = RecordOut {
            extent: 42,
            size: 4096,
            date: [123, 1, 2, 3, 4, 5, 0],
            is_dir: true,
            id: b"DIR",
            su: b"XY\x04\x01",
        };
        let mut out = Vec::new();
        rec.encode(&mut out).unwrap();
        assert_eq!(out.len(), rec.len());
        assert_eq!(out.len(), 33 + 3 + 4, "odd id length needs no padding");
        let back = RecordIn::parse(&out).unwrap();
        assert_eq!((back.extent, back.size, back.is_dir()), (42, 4096, true));
        assert_eq!(
            (back.id.as_slice(), back.su.as_slice()),
            (&b"DIR"[..], &b"XY\x04\x01"[..])
        );
    }

    #[test]
    fn record_parse_rejects_garbage() {
        let cases: &[&[u8]] = &[&[], &[0; 10], &[34; 34], &[40; 40]];
        for case in cases {
            assert!(RecordIn::parse(case).is_err(), "{case:?}");
        }
    }

    #[test]
    fn packing_never_straddles_sectors() {
        let (offsets, size) = pack_records([34, 34, 1900, 100]);
        assert_eq!(offsets, vec![0, 34, 68, 2048]);
        assert_eq!(size, 4096);
        assert_eq!(
            pack_records([]).1,
            BLOCK_SIZE,
            "a directory has at least one sector"
        );
    }
}
