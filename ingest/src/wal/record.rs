//! The record format: a header of payload length and CRC-32, then the payload (see the
//! module documentation of [`super`]).

use super::*;

pub(super) const HEADER_LEN: usize = 8;

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
