//! One gzip member stitched from separately compressed pieces, so that the
//! large part of /metrics (the per-GPU families, fixed for a whole snapshot)
//! is compressed once per snapshot while the small live parts (process CPU,
//! snapshot age) are compressed per scrape.
//!
//! Each piece is a raw deflate stream ended by a sync flush (an empty stored
//! block, no final bit): such streams concatenate into one valid stream, since
//! a fresh compressor never refers back past its own start. The member ends
//! with an empty final block and the CRC-32 and length of the whole text,
//! combined from the pieces' (RFC 1951 §3.2.3, RFC 1952 §2.3).

use std::cell::RefCell;

use flate2::{Compress, Compression, FlushCompress, Status};

/// A piece of text, deflated on its own.
#[derive(Debug, Clone)]
pub struct Piece {
    /// Raw deflate blocks, sync-flushed, without a final block.
    deflated: Vec<u8>,
    /// CRC-32 of the text.
    crc: crc32fast::Hasher,
    /// Length of the text.
    len: u64,
}

/// gzip header: no name, no time, OS unknown; XFL 4 (fastest compression).
const HEADER: [u8; 10] = [0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 4, 0xff];

/// An empty final block with fixed codes: ends the deflate stream.
const FINAL_BLOCK: [u8; 2] = [0x03, 0x00];

thread_local! {
    /// One compressor per thread, reset for each piece: its state is a few
    /// hundred KiB, too much to allocate for each scrape.
    static COMPRESSOR: RefCell<Compress> = RefCell::new(Compress::new(Compression::fast(), false));
}

impl Piece {
    /// Deflates `text` (fastest level, like the whole body was before).
    pub fn deflate(text: &[u8]) -> Result<Piece, flate2::CompressError> {
        let mut crc = crc32fast::Hasher::new();
        crc.update(text);
        let deflated = COMPRESSOR.with(|c| deflate_with(&mut c.borrow_mut(), text))?;
        Ok(Piece {
            deflated,
            crc,
            len: text.len() as u64,
        })
    }
}

impl Piece {
    /// `text` in stored (uncompressed) blocks: for the few hundred bytes
    /// read at each scrape, where resetting a compressor (hundreds of KiB of
    /// tables) would cost more than the bytes saved.
    pub fn stored(text: &[u8]) -> Piece {
        let mut crc = crc32fast::Hasher::new();
        crc.update(text);
        let mut deflated = Vec::with_capacity(text.len() + 5 * (text.len() / 65_535 + 1));
        for chunk in text.chunks(usize::from(u16::MAX)) {
            // BFINAL 0, BTYPE 00, padded to the byte; LEN and its complement.
            let len = chunk.len() as u16;
            deflated.push(0);
            deflated.extend_from_slice(&len.to_le_bytes());
            deflated.extend_from_slice(&(!len).to_le_bytes());
            deflated.extend_from_slice(chunk);
        }
        Piece {
            deflated,
            crc,
            len: text.len() as u64,
        }
    }

    /// Stored when `text` is small (under 4 KiB), deflated otherwise.
    pub fn small(text: &[u8]) -> Result<Piece, flate2::CompressError> {
        if text.len() < 4096 {
            Ok(Piece::stored(text))
        } else {
            Piece::deflate(text)
        }
    }
}

fn deflate_with(compress: &mut Compress, text: &[u8]) -> Result<Vec<u8>, flate2::CompressError> {
    compress.reset();
    let mut out = Vec::with_capacity(text.len() / 4 + 64);
    loop {
        if out.len() == out.capacity() {
            out.reserve(out.capacity().max(64));
        }
        let consumed = compress.total_in() as usize;
        let status = compress.compress_vec(&text[consumed..], &mut out, FlushCompress::Sync)?;
        // The flush is complete once all input is in and the compressor
        // left room in the output (zlib's rule for flushes).
        let done = compress.total_in() as usize == text.len() && out.len() < out.capacity();
        if done || status == Status::StreamEnd {
            return Ok(out);
        }
    }
}

/// One gzip member holding the pieces' texts in order.
pub fn member(pieces: &[&Piece]) -> Vec<u8> {
    let size: usize = pieces.iter().map(|p| p.deflated.len()).sum();
    let mut out = Vec::with_capacity(HEADER.len() + size + FINAL_BLOCK.len() + 8);
    out.extend_from_slice(&HEADER);
    let mut crc = crc32fast::Hasher::new();
    let mut len = 0u64;
    for piece in pieces {
        out.extend_from_slice(&piece.deflated);
        crc.combine(&piece.crc);
        len += piece.len;
    }
    out.extend_from_slice(&FINAL_BLOCK);
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    // ISIZE is the length modulo 2^32.
    out.extend_from_slice(&(len as u32).to_le_bytes());
    out
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use super::*;

    fn gunzip(bytes: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut decoder = flate2::read::GzDecoder::new(bytes);
        decoder.read_to_end(&mut out).expect("a valid gzip member");
        // Nothing after the member: a single-member reader saw it all.
        let mut rest = Vec::new();
        decoder
            .into_inner()
            .read_to_end(&mut rest)
            .expect("read the rest");
        assert!(rest.is_empty(), "{} bytes after the member", rest.len());
        out
    }

    #[test]
    fn stitched_pieces_decode_to_the_joined_text() {
        let big: String = (0..5000)
            .map(|i| {
                format!(
                    "gpuwatch_gpu_utilization_ratio{{gpu=\"{}\"}} 0.{i}\n",
                    i % 8
                )
            })
            .collect();
        let texts: [&[u8]; 4] = [b"# HELP a\n", big.as_bytes(), b"", b"tail 1\n"];
        let pieces: Vec<Piece> = texts.iter().map(|t| Piece::deflate(t).unwrap()).collect();
        // Stored pieces mix with deflated ones, large ones in several blocks.
        let stored: Vec<Piece> = texts.iter().map(|t| Piece::stored(t)).collect();
        let mixed = [&stored[0], &pieces[1], &stored[2], &stored[1], &pieces[3]];
        assert_eq!(
            gunzip(&member(&mixed)),
            [texts[0], texts[1], texts[2], texts[1], texts[3]].concat()
        );
        let refs: Vec<&Piece> = pieces.iter().collect();
        let joined: Vec<u8> = texts.concat();
        assert_eq!(gunzip(&member(&refs)), joined);
        // A piece can be reused in another member (the cached ones are).
        assert_eq!(
            gunzip(&member(&[&pieces[3], &pieces[1]])),
            [texts[3], texts[1]].concat()
        );
        // No pieces: an empty text.
        assert_eq!(gunzip(&member(&[])), b"");
    }

    #[test]
    fn incompressible_text_larger_than_the_first_guess() {
        // Random-looking bytes do not shrink: the output must grow past
        // the first quarter-size guess.
        let mut state = 0x2545_f491_4f6c_dd1du64;
        let noise: Vec<u8> = (0..200_000)
            .map(|_| {
                state ^= state << 13;
                state ^= state >> 7;
                state ^= state << 17;
                state as u8
            })
            .collect();
        let piece = Piece::deflate(&noise).unwrap();
        assert_eq!(gunzip(&member(&[&piece])), noise);
    }
}
