//! System Use Sharing Protocol (SUSP 1.12) and Rock Ridge (RRIP 1.12) entries: building the entries
//! a record needs, deciding which stay in the record and which move to continuation areas (CE), and
//! decoding them back, following CE chains with a hard cap so hostile images cannot loop us.

use super::format::{get_u32_le, put_u32_both};
use super::{BLOCK_SIZE, IsoError};

/// Extension identifier announced in ER; xorriso, bsdtar, isoinfo and Linux all key on it.
pub(crate) const RRIP_ID: &[u8] = b"RRIP_1991A";
const RRIP_DESCRIPTOR: &[u8] =
    b"THE ROCK RIDGE INTERCHANGE PROTOCOL PROVIDES SUPPORT FOR POSIX FILE SYSTEM SEMANTICS";
const RRIP_SOURCE: &[u8] = b"PLEASE CONTACT DISC PUBLISHER FOR SPECIFICATION SOURCE.  SEE PUBLISHER IDENTIFIER IN PRIMARY VOLUME DESCRIPTOR FOR CONTACT INFORMATION.";
/// Later RRIP revisions register these identifiers instead; readers must accept them too.
const OTHER_RRIP_IDS: &[&[u8]] = &[b"IEEE_P1282", b"IEEE_1282"];

/// A CE entry is always 28 bytes (SUSP 5.1).
pub(crate) const CE_LEN: usize = 28;
/// One entry's length byte caps it at 255 bytes, 5 of them NM's header.
const NM_MAX_CHUNK: usize = 255 - 5;
/// NM flag: the name continues in the next NM entry (RRIP 4.1.4).
const NM_CONTINUE: u8 = 0x01;
/// NM flags naming "." or ".." rather than carrying bytes.
const NM_CURRENT_OR_PARENT: u8 = 0x02 | 0x04;
/// TF flags: modify, access and attribute-change times, short (7-byte) form (RRIP 4.1.6).
const TF_MODIFY_ACCESS_CHANGE: u8 = 0x02 | 0x04 | 0x08;
/// Longest CE chain we follow; real writers need one or two, so this only stops loops.
pub(crate) const MAX_CE_CHAIN: usize = 32;

/// POSIX file type bits carried in PX (RRIP 4.1.1).
pub(crate) const S_IFDIR: u32 = 0o040_000;
pub(crate) const S_IFREG: u32 = 0o100_000;

/// Starts an entry: signature, total length, version 1.
fn entry(sig: &[u8; 2], body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + body.len());
    out.extend_from_slice(sig);
    out.push((4 + body.len()) as u8);
    out.push(1);
    out.extend_from_slice(body);
    out
}

/// SP: marks the volume as using SUSP; must open the root's "." system use area (SUSP 5.3).
pub(crate) fn sp() -> Vec<u8> {
    entry(b"SP", &[0xBE, 0xEF, 0])
}

/// ER: registers the Rock Ridge extension, version 1 (SUSP 5.5).
pub(crate) fn er() -> Vec<u8> {
    let mut body = vec![
        RRIP_ID.len() as u8,
        RRIP_DESCRIPTOR.len() as u8,
        RRIP_SOURCE.len() as u8,
        1,
    ];
    body.extend_from_slice(RRIP_ID);
    body.extend_from_slice(RRIP_DESCRIPTOR);
    body.extend_from_slice(RRIP_SOURCE);
    entry(b"ER", &body)
}

/// PX: mode, link count, uid 0, gid 0 and serial number, the 44-byte RRIP 1.12 form.
pub(crate) fn px(mode: u32, nlink: u32, ino: u32) -> Vec<u8> {
    let mut body = [0u8; 40];
    for (i, v) in [mode, nlink, 0, 0, ino].into_iter().enumerate() {
        put_u32_both(&mut body[i * 8..i * 8 + 8], v);
    }
    entry(b"PX", &body)
}

/// TF: modify, access and change time, all the image timestamp.
pub(crate) fn tf(date: [u8; 7]) -> Vec<u8> {
    let mut body = vec![TF_MODIFY_ACCESS_CHANGE];
    for _ in 0..3 {
        body.extend_from_slice(&date);
    }
    entry(b"TF", &body)
}

/// NM entries for `name`, split with the CONTINUE flag because one entry holds at most 250 bytes.
pub(crate) fn nm(name: &[u8]) -> Vec<Vec<u8>> {
    let chunks: Vec<&[u8]> = name.chunks(NM_MAX_CHUNK).collect();
    let last = chunks.len().saturating_sub(1);
    let mut out = Vec::with_capacity(chunks.len());
    for (i, chunk) in chunks.iter().enumerate() {
        let mut body = vec![if i < last { NM_CONTINUE } else { 0 }];
        body.extend_from_slice(chunk);
        out.push(entry(b"NM", &body));
    }
    out
}

/// CE: where the next continuation area is (SUSP 5.1).
pub(crate) fn ce(loc: CaLocation) -> Vec<u8> {
    let mut body = [0u8; 24];
    for (i, v) in [loc.block, loc.offset, loc.len].into_iter().enumerate() {
        put_u32_both(&mut body[i * 8..i * 8 + 8], v);
    }
    entry(b"CE", &body)
}

/// Position of one continuation area on the image.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct CaLocation {
    pub block: u32,
    pub offset: u32,
    pub len: u32,
}

/// How one record's entries are split: a prefix inside the record, the rest in continuation areas,
/// each small enough to sit in one block (Linux refuses areas that cross a block boundary).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct SuPlan {
    inline: Vec<u8>,
    pieces: Vec<Vec<u8>>,
}

impl SuPlan {
    /// Splits `entries` so that the record's part, CE included, fits in `inline_cap` bytes. Entries
    /// keep their order, so SP stays first where it must be.
    pub(crate) fn new(entries: Vec<Vec<u8>>, inline_cap: usize) -> Self {
        let total: usize = entries.iter().map(Vec::len).sum();
        let mut plan = Self::default();
        let mut rest = entries.into_iter().peekable();
        let inline_budget = if total <= inline_cap {
            inline_cap
        } else {
            inline_cap.saturating_sub(CE_LEN)
        };
        while let Some(e) = rest.next_if(|e| plan.inline.len() + e.len() <= inline_budget) {
            plan.inline.extend_from_slice(&e);
        }
        // Every piece reserves room for a CE so a following piece can always be chained.
        let piece_budget = BLOCK_SIZE - CE_LEN;
        for e in rest {
            match plan.pieces.last_mut() {
                Some(piece) if piece.len() + e.len() <= piece_budget => piece.extend_from_slice(&e),
                _ => plan.pieces.push(e),
            }
        }
        plan
    }

    /// Lengths of the continuation areas as written, each with its chaining CE.
    pub(crate) fn piece_lens(&self) -> Vec<usize> {
        let n = self.pieces.len();
        let chained = |i: usize| if i + 1 < n { CE_LEN } else { 0 };
        self.pieces
            .iter()
            .enumerate()
            .map(|(i, p)| p.len() + chained(i))
            .collect()
    }

    /// Length of the system use area inside the record, padded to even so records stay even.
    pub(crate) fn inline_len(&self) -> usize {
        let ce = if self.pieces.is_empty() { 0 } else { CE_LEN };
        (self.inline.len() + ce).next_multiple_of(2)
    }

    /// The record's system use bytes; `locs` are where `piece_lens()` were placed.
    pub(crate) fn inline_bytes(&self, locs: &[CaLocation]) -> Vec<u8> {
        let mut out = self.inline.clone();
        if let Some(first) = locs.first() {
            out.extend_from_slice(&ce(*first));
        }
        out.resize(self.inline_len(), 0);
        out
    }

    /// Continuation area `i` as written, chained to `locs[i + 1]` when there is one.
    pub(crate) fn piece_bytes(&self, i: usize, locs: &[CaLocation]) -> Vec<u8> {
        let mut out = self.pieces.get(i).cloned().unwrap_or_default();
        if let Some(next) = locs.get(i + 1) {
            out.extend_from_slice(&ce(*next));
        }
        out
    }
}

/// One decoded entry: signature, version and body (bytes after the 4-byte header).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SuEntry<'a> {
    pub sig: [u8; 2],
    pub version: u8,
    pub body: &'a [u8],
}

/// Splits a system use area into entries. Stops quietly at padding or an entry whose length does
/// not fit, as SUSP 5 allows fewer than 4 trailing bytes and real images carry odd padding.
pub(crate) fn parse_entries(area: &[u8]) -> Vec<SuEntry<'_>> {
    let mut out = Vec::new();
    let mut pos = 0usize;
    while let Some(head) = area.get(pos..pos + 4) {
        let len = usize::from(head[2]);
        let Some(body) = area.get(pos + 4..pos + len.max(4)).filter(|_| len >= 4) else {
            break;
        };
        if &head[..2] == b"ST" {
            break; // SUSP terminator: whatever follows is not entries
        }
        out.push(SuEntry {
            sig: [head[0], head[1]],
            version: head[3],
            body,
        });
        pos += len;
    }
    out
}

/// What the reader learns from one record's Rock Ridge entries.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct RrInfo {
    /// SP seen, with its LEN_SKP (only meaningful for the root's "." record).
    pub sp_skip: Option<u8>,
    /// An ER registered a Rock Ridge identifier.
    pub rrip_registered: bool,
    /// Any RRIP entry (PX, NM, TF …) was present.
    pub has_rr_entries: bool,
    pub name: Option<Vec<u8>>,
    pub mode: Option<u32>,
    /// CL: this "file" stands for a directory relocated to this block (RRIP 4.1.5.1).
    pub child_link: Option<u32>,
    /// RE: this directory is the relocated copy, listed where its CL points instead.
    pub relocated: bool,
}

impl RrInfo {
    /// Applies one entry. Returns the continuation area a CE points to, if this entry is one.
    fn apply(&mut self, e: &SuEntry<'_>) -> Option<CaLocation> {
        let body = e.body;
        match &e.sig {
            b"SP" if body.len() >= 3 && body[..2] == [0xBE, 0xEF] => self.sp_skip = Some(body[2]),
            b"ER" => self.rrip_registered |= is_rrip_er(body),
            b"CE" => return parse_ce(body),
            b"PX" => self.mode = get_u32_le(body, 0),
            b"NM" => self.apply_nm(body),
            b"CL" => self.child_link = get_u32_le(body, 0),
            b"RE" => self.relocated = true,
            _ => {}
        }
        if matches!(
            &e.sig,
            b"PX" | b"NM" | b"TF" | b"SL" | b"PN" | b"RR" | b"CL" | b"RE" | b"PL"
        ) {
            self.has_rr_entries = true;
        }
        None
    }

    fn apply_nm(&mut self, body: &[u8]) {
        let Some((&flags, bytes)) = body.split_first() else {
            return;
        };
        if flags & NM_CURRENT_OR_PARENT == 0 {
            self.name
                .get_or_insert_with(Vec::new)
                .extend_from_slice(bytes);
        }
    }
}

fn parse_ce(body: &[u8]) -> Option<CaLocation> {
    Some(CaLocation {
        block: get_u32_le(body, 0)?,
        offset: get_u32_le(body, 8)?,
        len: get_u32_le(body, 16)?,
    })
}

fn is_rrip_er(body: &[u8]) -> bool {
    let Some(&id_len) = body.first() else {
        return false;
    };
    let Some(id) = body.get(4..4 + usize::from(id_len)) else {
        return false;
    };
    id == RRIP_ID || OTHER_RRIP_IDS.contains(&id)
}

/// Decodes the entries of `area` and of every continuation area it chains to. `fetch` reads a
/// continuation area from the image; the chain is capped at `MAX_CE_CHAIN` areas.
pub(crate) fn collect(
    area: &[u8],
    fetch: &mut dyn FnMut(CaLocation) -> Result<Vec<u8>, IsoError>,
) -> Result<RrInfo, IsoError> {
    let mut info = RrInfo::default();
    let mut next = apply_area(&mut info, area);
    let mut followed = 0usize;
    while let Some(loc) = next {
        followed += 1;
        if followed > MAX_CE_CHAIN {
            return Err(IsoError::Malformed(format!(
                "system use continuation chain longer than {MAX_CE_CHAIN} areas"
            )));
        }
        let bytes = fetch(loc)?;
        next = apply_area(&mut info, &bytes);
    }
    Ok(info)
}

/// Applies every entry of one area; the last CE in it (SUSP allows one) names the next area.
fn apply_area(info: &mut RrInfo, area: &[u8]) -> Option<CaLocation> {
    let mut next = None;
    for e in parse_entries(area) {
        if let Some(loc) = info.apply(&e) {
            next = Some(loc);
        }
    }
    next
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    #[test]
    fn entry_encodings() {
        let cases: Vec<(&str, Vec<u8>, usize, &[u8])> = vec![
            ("SP", sp(), 7, b"SP\x07\x01\xbe\xef\x00"),
            (
                "PX",
                px(0o100_644, 1, 7),
                44,
                b"PX\x2c\x01\xa4\x81\x00\x00\x00\x00\x81\xa4\x01\x00",
            ),
            (
                "TF",
                tf([123, 1, 2, 3, 4, 5, 0]),
                26,
                b"TF\x1a\x01\x0e\x7b\x01\x02\x03\x04\x05\x00\x7b",
            ),
            ("NM", nm(b"abc").concat(), 8, b"NM\x08\x01\x00abc"),
            (
                "ER",
                er(),
                8 + 10 + 84 + 135,
                b"ER\xed\x01\x0a\x54\x87\x01RRIP_1991A",
            ),
            (
                "CE",
                ce(CaLocation {
                    block: 30,
                    offset: 2,
                    len: 237,
                }),
                28,
                b"CE\x1c\x01\x1e\x00\x00\x00\x00\x00\x00\x1e\x02\x00\x00\x00\x00\x00\x00\x02\xed",
            ),
        ];
        for (what, bytes, len, prefix) in cases {
            assert_eq!(bytes.len(), len, "{what} length");
            assert_eq!(usize::from(bytes[2]), len, "{what} length byte");
            assert_eq!(&bytes[..prefix.len()], prefix, "{what} bytes");
        }
    }

    #[test]
    fn long_names_split_with_continue_flag() {
        let cases: &[(usize, &[(u8, usize)])] = &[
            (1, &[(0, 1)]),
            (250, &[(0, 250)]),
            (251, &[(1, 250), (0, 1)]),
            (255, &[(1, 250), (0, 5)]),
            (600, &[(1, 250), (1, 250), (0, 100)]),
        ];
        for (len, want) in cases {
            let name = vec![b'x'; *len];
            let got: Vec<(u8, usize)> = nm(&name).iter().map(|e| (e[4], e.len() - 5)).collect();
            assert_eq!(&got, want, "name of {len} bytes");
            let mut info = RrInfo::default();
            apply_area(&mut info, &nm(&name).concat());
            assert_eq!(
                info.name.as_deref(),
                Some(name.as_slice()),
                "round trip of {len}"
            );
        }
    }

    #[test]
    fn parse_entries_tolerates_garbage() {
        let cases: &[(&[u8], usize)] = &[
            (b"", 0),
            (b"\x00", 0),
            (b"NM\x00\x01", 0),         // zero length would loop forever
            (b"NM\x03\x01xyz", 0),      // shorter than a header
            (b"NM\xff\x01abc", 0),      // runs past the area
            (b"NM\x05\x01\x00\x00", 1), // trailing padding byte
            (b"NM\x05\x01\x00ST\x04\x01NM\x05\x01\x00", 1), // ST ends the area
        ];
        for (area, want) in cases {
            assert_eq!(parse_entries(area).len(), *want, "{area:?}");
        }
    }

    /// Lays out a plan's pieces at fake consecutive locations and decodes the whole chain back.
    fn round_trip(plan: &SuPlan) -> RrInfo {
        let lens = plan.piece_lens();
        let locs: Vec<CaLocation> = (0..lens.len())
            .map(|i| CaLocation {
                block: 100 + i as u32,
                offset: 0,
                len: lens[i] as u32,
            })
            .collect();
        let areas: BTreeMap<u32, Vec<u8>> = (0..lens.len())
            .map(|i| (locs[i].block, plan.piece_bytes(i, &locs)))
            .collect();
        for (i, loc) in locs.iter().enumerate() {
            assert_eq!(areas[&loc.block].len(), lens[i], "piece {i} length");
            assert!(lens[i] <= BLOCK_SIZE, "piece {i} fits a block");
        }
        let inline = plan.inline_bytes(&locs);
        assert_eq!(inline.len(), plan.inline_len());
        let mut fetch = |loc: CaLocation| Ok(areas[&loc.block].clone());
        collect(&inline, &mut fetch).unwrap()
    }

    #[test]
    fn placement_spills_to_continuation_areas() {
        // (name length, inline capacity, pieces expected)
        let cases: &[(usize, usize, usize)] =
            &[(10, 206, 0), (100, 206, 0), (140, 206, 1), (255, 206, 1)];
        for &(len, cap, pieces) in cases {
            let name = vec![b'n'; len];
            let mut entries = vec![px(0o100_600, 1, 9), tf([0; 7])];
            entries.extend(nm(&name));
            let plan = SuPlan::new(entries, cap);
            assert_eq!(plan.pieces.len(), pieces, "name of {len}");
            assert!(plan.inline_len() <= cap, "name of {len}: inline fits");
            let info = round_trip(&plan);
            assert_eq!(info.name, Some(name), "name of {len}");
            assert_eq!(info.mode, Some(0o100_600));
        }
    }

    #[test]
    fn ce_chain_spans_several_areas() {
        let names: Vec<Vec<u8>> = (0..30u8).map(|i| vec![b'a' + i % 26; 200]).collect();
        let entries: Vec<Vec<u8>> = names.iter().flat_map(|n| nm(n)).collect();
        let plan = SuPlan::new(entries, 206);
        assert!(plan.pieces.len() >= 3, "6000 bytes need three areas");
        assert_eq!(round_trip(&plan).name, Some(names.concat()));
    }

    #[test]
    fn root_record_keeps_sp_first_and_er_findable() {
        let plan = SuPlan::new(vec![sp(), px(0o40_755, 2, 1), tf([0; 7]), er()], 220);
        let info = round_trip(&plan);
        assert_eq!(&plan.inline_bytes(&[CaLocation::default()])[..2], b"SP");
        assert_eq!(info.sp_skip, Some(0));
        assert!(info.rrip_registered && info.has_rr_entries);
    }

    #[test]
    fn ce_loops_are_cut_off() {
        let loc = CaLocation {
            block: 5,
            offset: 0,
            len: 28,
        };
        let area = ce(loc);
        let mut fetch = |_| Ok(ce(loc));
        let err = collect(&area, &mut fetch).unwrap_err();
        assert!(err.to_string().contains("continuation chain"), "{err}");
    }

    #[test]
    fn fetch_errors_propagate() {
        let area = ce(CaLocation {
            block: 9,
            offset: 0,
            len: 28,
        });
        let mut fetch = |_| Err(IsoError::Malformed("beyond the image".into()));
        assert!(collect(&area, &mut fetch).is_err());
    }
}
