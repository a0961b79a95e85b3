//! The record format: a header of payload length and CRC-32, then the payload (see the
//! module documentation of [`super`]).

use super::*;

pub(super) const HEADER_LEN: usize = 8;

/// The version of the record format, written to the log folder's `FORMAT` file. Raise it with
/// any change to the bytes of a record or a segment, and keep reading every earlier version a
/// release promises to open (CHANGELOG.md).
pub const FORMAT: u32 = 1;

/// The file in the log folder that names the format of its segments. A folder without it was
/// written before the file existed, in format 1.
pub(super) const FORMAT_FILE: &str = "FORMAT";

/// Checks the format of the log in `dir` and, when the folder does not say it yet, records
/// [`FORMAT`] there durably. A newer format is refused before any segment is read: a release
/// that replayed records it cannot parse would stop at the first and lose the rest.
pub(super) fn check_format(dir: &Path) -> Result<(), WalError> {
    let path = dir.join(FORMAT_FILE);
    match fs::read_to_string(&path) {
        Ok(text) => parse_format(&text),
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            let staging = dir.join(format!("{FORMAT_FILE}.new"));
            let mut file = File::create(&staging)?;
            io::Write::write_all(&mut file, format!("{FORMAT}\n").as_bytes())?;
            file.sync_all()?;
            fs::rename(&staging, &path)?;
            sync_dir(dir)?;
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// Checks the format of the log in `dir` as [`check_format`] does, writing nothing: a folder
/// without the file is format 1.
pub(super) fn check_format_read_only(dir: &Path) -> Result<(), WalError> {
    match fs::read_to_string(dir.join(FORMAT_FILE)) {
        Ok(text) => parse_format(&text),
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(error) => Err(error.into()),
    }
}

fn parse_format(text: &str) -> Result<(), WalError> {
    let found: u32 = text
        .trim()
        .parse()
        .map_err(|_| WalError::UnknownFormat(text.trim().to_owned()))?;
    if found > FORMAT {
        return Err(WalError::NewerFormat {
            found,
            known: FORMAT,
        });
    }
    Ok(())
}

/// One accepted batch, as logged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WalRecord {
    pub lsn: u64,
    pub received_at: i64,
    pub survey_id: SurveyId,
    pub identifier: String,
    pub body: Bytes,
}

impl WalRecord {
    pub(super) fn encoded_len(&self) -> usize {
        HEADER_LEN
            + 8
            + 8
            + 1
            + self.survey_id.as_str().len()
            + 2
            + self.identifier.len()
            + self.body.len()
    }

    pub(super) fn encode_into(&self, out: &mut Vec<u8>) -> Result<(), WalError> {
        let survey = self.survey_id.as_str().as_bytes();
        let identifier = self.identifier.as_bytes();
        let survey_len = u8::try_from(survey.len()).map_err(|_| WalError::RecordTooLarge)?;
        let identifier_len =
            u16::try_from(identifier.len()).map_err(|_| WalError::RecordTooLarge)?;
        let payload_len = self.encoded_len() - HEADER_LEN;
        let payload_len = u32::try_from(payload_len).map_err(|_| WalError::RecordTooLarge)?;
        let start = out.len();
        out.extend_from_slice(&payload_len.to_le_bytes());
        out.extend_from_slice(&[0; 4]);
        out.extend_from_slice(&self.lsn.to_le_bytes());
        out.extend_from_slice(&self.received_at.to_le_bytes());
        out.push(survey_len);
        out.extend_from_slice(survey);
        out.extend_from_slice(&identifier_len.to_le_bytes());
        out.extend_from_slice(identifier);
        out.extend_from_slice(&self.body);
        let crc = crc32fast::hash(&out[start + HEADER_LEN..]);
        out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
        Ok(())
    }

    /// Decodes one payload; `None` when it is not a well-formed record.
    pub(super) fn decode(payload: &[u8]) -> Option<Self> {
        let mut cursor = payload;
        let lsn = u64::from_le_bytes(take(&mut cursor, 8)?.try_into().ok()?);
        let received_at = i64::from_le_bytes(take(&mut cursor, 8)?.try_into().ok()?);
        let survey_len = *take(&mut cursor, 1)?.first()? as usize;
        let survey = std::str::from_utf8(take(&mut cursor, survey_len)?).ok()?;
        let identifier_len = u16::from_le_bytes(take(&mut cursor, 2)?.try_into().ok()?) as usize;
        let identifier = std::str::from_utf8(take(&mut cursor, identifier_len)?).ok()?;
        Some(WalRecord {
            lsn,
            received_at,
            survey_id: SurveyId::parse(survey)?,
            identifier: identifier.to_owned(),
            body: Bytes::copy_from_slice(cursor),
        })
    }
}

pub(super) fn take<'a>(cursor: &mut &'a [u8], len: usize) -> Option<&'a [u8]> {
    if cursor.len() < len {
        return None;
    }
    let (head, tail) = cursor.split_at(len);
    *cursor = tail;
    Some(head)
}
