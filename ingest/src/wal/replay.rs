//! Reading the log back when it is opened: every segment in order, up to its first record that
//! does not hold.

use std::io::Read;

use super::*;

/// Reads every segment in order. A segment ends at its first unreadable record, at a record
/// whose sequence number does not grow, or at one outside the segment's range (from its name up
/// to the next segment's name); the rest of the file is ignored, not cut: it is a torn write or
/// a recycled file's older records, and nothing is written after it.
///
/// A client cannot plant a record for replay to find in old bytes: a body is validated JSON,
/// whose smallest byte is a tab (0x09), so a length field made of body bytes is at least
/// 0x0909_0909 (151 MiB), more than a segment holds. A header straddling a body's end takes
/// its other bytes from the log's next header, and must then also sit exactly where the new
/// records end after a crash and carry a sequence number in the segment's range.
pub(super) fn replay(dir: &Path) -> Result<Recovered, WalError> {
    let mut recovered = Recovered::default();
    let segments = list_segments(dir)?;
    for (index, (first, path)) in segments.iter().enumerate() {
        let end = segments.get(index + 1).map_or(u64::MAX, |(next, _)| *next);
        let mut data = Vec::new();
        File::open(path)?.read_to_end(&mut data)?;
        let mut offset = 0usize;
        while let Some((record, len)) = read_record(&data[offset..]) {
            let out_of_order = recovered
                .records
                .last()
                .is_some_and(|last| last.lsn >= record.lsn);
            if out_of_order || record.lsn < *first || record.lsn >= end {
                break;
            }
            recovered.records.push(record);
            offset += len;
        }
        let ignored = (data.len() - offset) as u64;
        if ignored > 0 {
            tracing::debug!(segment = %path.display(), bytes = ignored, "write-ahead log segment ends before its file");
            recovered.ignored_bytes += ignored;
        }
    }
    Ok(recovered)
}

pub(super) fn read_record(data: &[u8]) -> Option<(WalRecord, usize)> {
    if data.len() < HEADER_LEN {
        return None;
    }
    let payload_len = u32::from_le_bytes(data[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(data[4..8].try_into().ok()?);
    let payload = data.get(HEADER_LEN..HEADER_LEN + payload_len)?;
    if crc32fast::hash(payload) != crc {
        return None;
    }
    Some((WalRecord::decode(payload)?, HEADER_LEN + payload_len))
}
