//! The descriptors of the fabric contract (`docs/fabric-contract.md`,
//! section 4, "Shared DDR"): the submission descriptor and the completion
//! entry as bytes, and the CRCs that guard them and the tokens.

use super::*;

/// `opcode` of a generation request.
pub const OP_GENERATE: u16 = 1;
/// `flags` bit: post a TOKENS completion per token.
pub const FLAG_STREAM: u8 = 1;

/// A submission descriptor (contract section 4).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sqe {
    pub seq: u32,
    pub opcode: u16,
    pub slot: u8,
    pub flags: u8,
    pub tag: u32,
    pub ctx: u16,
    pub prompt_addr: u64,
    pub prompt_len: u32,
    pub max_tokens: u32,
    pub output_addr: u64,
    pub output_cap: u32,
    pub temperature: f32,
    pub seed: u64,
    pub stop_token: u32,
}

/// Why a descriptor or completion entry was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DescriptorError {
    #[error("{what}: CRC {found:#010x} does not match its contents ({expected:#010x})")]
    Crc {
        what: &'static str,
        expected: u32,
        found: u32,
    },
    #[error("{what}: sequence {found} where {expected} was due (a stale entry: a cache sync is missing)")]
    Stale {
        what: &'static str,
        expected: u32,
        found: u32,
    },
    #[error("{what}: field {field} holds {value}, which the contract does not define")]
    Field {
        what: &'static str,
        field: &'static str,
        value: u32,
    },
}

fn crc(bytes: &[u8]) -> u32 {
    crc32fast::hash(bytes)
}

fn le_u16(b: &[u8], at: usize) -> u16 {
    u16::from_le_bytes([b[at], b[at + 1]])
}
fn le_u32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}
fn le_u64(b: &[u8], at: usize) -> u64 {
    u64::from(le_u32(b, at)) | (u64::from(le_u32(b, at + 4)) << 32)
}

impl Sqe {
    /// The 64 bytes the host writes into the ring, CRC included.
    pub fn encode(&self) -> [u8; SQE_LEN] {
        let mut b = [0u8; SQE_LEN];
        b[0..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..6].copy_from_slice(&self.opcode.to_le_bytes());
        b[6] = self.slot;
        b[7] = self.flags;
        b[8..12].copy_from_slice(&self.tag.to_le_bytes());
        b[12..14].copy_from_slice(&self.ctx.to_le_bytes());
        b[16..24].copy_from_slice(&self.prompt_addr.to_le_bytes());
        b[24..28].copy_from_slice(&self.prompt_len.to_le_bytes());
        b[28..32].copy_from_slice(&self.max_tokens.to_le_bytes());
        b[32..40].copy_from_slice(&self.output_addr.to_le_bytes());
        b[40..44].copy_from_slice(&self.output_cap.to_le_bytes());
        b[44..48].copy_from_slice(&self.temperature.to_bits().to_le_bytes());
        b[48..56].copy_from_slice(&self.seed.to_le_bytes());
        b[56..60].copy_from_slice(&self.stop_token.to_le_bytes());
        let sum = crc(&b[..60]);
        b[60..64].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes a descriptor read from slot `expected_seq` of the ring,
    /// checking its CRC and its sequence number.
    pub fn decode(b: &[u8; SQE_LEN], expected_seq: u32) -> Result<Sqe, DescriptorError> {
        let stored = le_u32(b, 60);
        let computed = crc(&b[..60]);
        let seq = le_u32(b, 0);
        if stored != computed {
            // An all-zero entry (never written, or written but not flushed)
            // fails its CRC too; call it what it most likely is.
            if b.iter().all(|&x| x == 0) {
                return Err(DescriptorError::Stale {
                    what: "submission descriptor",
                    expected: expected_seq,
                    found: seq,
                });
            }
            return Err(DescriptorError::Crc {
                what: "submission descriptor",
                expected: computed,
                found: stored,
            });
        }
        if seq != expected_seq {
            return Err(DescriptorError::Stale {
                what: "submission descriptor",
                expected: expected_seq,
                found: seq,
            });
        }
        Ok(Sqe {
            seq,
            opcode: le_u16(b, 4),
            slot: b[6],
            flags: b[7],
            tag: le_u32(b, 8),
            ctx: le_u16(b, 12),
            prompt_addr: le_u64(b, 16),
            prompt_len: le_u32(b, 24),
            max_tokens: le_u32(b, 28),
            output_addr: le_u64(b, 32),
            output_cap: le_u32(b, 40),
            temperature: f32::from_bits(le_u32(b, 44)),
            seed: le_u64(b, 48),
            stop_token: le_u32(b, 56),
        })
    }
}

/// `kind` of a completion entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqeKind {
    /// Progress: more tokens were written.
    Tokens = 1,
    /// The request is over; the context is free.
    Done = 2,
}

/// `status` of a completion entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CqeStatus {
    Ok = 0,
    Cancelled = 1,
    BadDescriptor = 2,
    SlotNotReady = 3,
    Fault = 4,
    StaleDescriptor = 5,
}

/// Why generation stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    None = 0,
    /// `max_tokens` reached.
    Length = 1,
    /// The stop (end-of-text) token was produced.
    Stop = 2,
}

/// A completion entry (contract section 4).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cqe {
    pub seq: u32,
    pub tag: u32,
    pub ctx: u16,
    pub kind: CqeKind,
    pub status: CqeStatus,
    pub n_tokens: u32,
    pub crc: u32,
    pub fabric_us: u32,
    pub finish: Finish,
}

impl Cqe {
    /// The 32 bytes the device writes into the ring, CRC included.
    pub fn encode(&self) -> [u8; CQE_LEN] {
        let mut b = [0u8; CQE_LEN];
        b[0..4].copy_from_slice(&self.seq.to_le_bytes());
        b[4..8].copy_from_slice(&self.tag.to_le_bytes());
        b[8..10].copy_from_slice(&self.ctx.to_le_bytes());
        b[10] = self.kind as u8;
        b[11] = self.status as u8;
        b[12..16].copy_from_slice(&self.n_tokens.to_le_bytes());
        b[16..20].copy_from_slice(&self.crc.to_le_bytes());
        b[20..24].copy_from_slice(&self.fabric_us.to_le_bytes());
        b[24] = self.finish as u8;
        let sum = crc(&b[..28]);
        b[28..32].copy_from_slice(&sum.to_le_bytes());
        b
    }

    /// Decodes the entry read from slot `expected_seq` of the ring.
    pub fn decode(b: &[u8; CQE_LEN], expected_seq: u32) -> Result<Cqe, DescriptorError> {
        let seq = le_u32(b, 0);
        let stored = le_u32(b, 28);
        let computed = crc(&b[..28]);
        // A stale entry is an intact old one: check the sequence first so
        // the error says what is really wrong.
        if stored == computed && seq != expected_seq {
            return Err(DescriptorError::Stale {
                what: "completion entry",
                expected: expected_seq,
                found: seq,
            });
        }
        if stored != computed {
            if b.iter().all(|&x| x == 0) {
                return Err(DescriptorError::Stale {
                    what: "completion entry",
                    expected: expected_seq,
                    found: 0,
                });
            }
            return Err(DescriptorError::Crc {
                what: "completion entry",
                expected: computed,
                found: stored,
            });
        }
        let kind = match b[10] {
            1 => CqeKind::Tokens,
            2 => CqeKind::Done,
            v => {
                return Err(DescriptorError::Field {
                    what: "completion entry",
                    field: "kind",
                    value: v.into(),
                })
            }
        };
        let status = match b[11] {
            0 => CqeStatus::Ok,
            1 => CqeStatus::Cancelled,
            2 => CqeStatus::BadDescriptor,
            3 => CqeStatus::SlotNotReady,
            4 => CqeStatus::Fault,
            5 => CqeStatus::StaleDescriptor,
            v => {
                return Err(DescriptorError::Field {
                    what: "completion entry",
                    field: "status",
                    value: v.into(),
                })
            }
        };
        let finish = match b[24] {
            0 => Finish::None,
            1 => Finish::Length,
            2 => Finish::Stop,
            v => {
                return Err(DescriptorError::Field {
                    what: "completion entry",
                    field: "finish",
                    value: v.into(),
                })
            }
        };
        Ok(Cqe {
            seq,
            tag: le_u32(b, 4),
            ctx: le_u16(b, 8),
            kind,
            status,
            n_tokens: le_u32(b, 12),
            crc: le_u32(b, 16),
            fabric_us: le_u32(b, 20),
            finish,
        })
    }
}

/// The CRC of output tokens, as the device computes it for a DONE entry:
/// CRC-32 over the tokens' little-endian bytes.
pub fn tokens_crc<'a>(tokens: impl IntoIterator<Item = &'a u32>) -> u32 {
    let mut crc = TokensCrc::default();
    crc.update(tokens);
    crc.value()
}

/// [`tokens_crc`] kept as the tokens come, a batch at a time: the host
/// checks a request's output without holding it (CRC-32 is a running
/// checksum, so updates over consecutive runs of tokens give the CRC of
/// them all).
#[derive(Debug, Clone, Default)]
pub struct TokensCrc(crc32fast::Hasher);

impl TokensCrc {
    /// Adds the next tokens of the output.
    pub fn update<'a>(&mut self, tokens: impl IntoIterator<Item = &'a u32>) {
        // Through a stack buffer: one update per 64 tokens, not one per token.
        let mut buf = [0u8; 256];
        let mut n = 0;
        for t in tokens {
            buf[n..n + 4].copy_from_slice(&t.to_le_bytes());
            n += 4;
            if n == buf.len() {
                self.0.update(&buf);
                n = 0;
            }
        }
        self.0.update(&buf[..n]);
    }

    /// The CRC of every token added so far.
    pub fn value(&self) -> u32 {
        self.0.clone().finalize()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn sqe_strategy() -> impl Strategy<Value = Sqe> {
        (
            any::<u32>(),
            any::<(u8, u8, u32, u16)>(),
            any::<(u64, u32, u32, u64, u32)>(),
            (0.0f32..4.0, any::<u64>(), any::<u32>()),
        )
            .prop_map(
                |(seq, (slot, flags, tag, ctx), (pa, pl, mt, oa, oc), (t, s, st))| Sqe {
                    seq,
                    opcode: OP_GENERATE,
                    slot,
                    flags,
                    tag,
                    ctx,
                    prompt_addr: pa,
                    prompt_len: pl,
                    max_tokens: mt,
                    output_addr: oa,
                    output_cap: oc,
                    temperature: t,
                    seed: s,
                    stop_token: st,
                },
            )
    }

    proptest! {
        #[test]
        fn token_crcs_are_the_crc_of_their_bytes(
            tokens in proptest::collection::vec(any::<u32>(), 0..300),
            split in 0usize..300,
        ) {
            let bytes: Vec<u8> = tokens.iter().flat_map(|t| t.to_le_bytes()).collect();
            prop_assert_eq!(tokens_crc(&tokens), crc32fast::hash(&bytes));
            let at = split.min(tokens.len());
            let chained = tokens_crc(tokens[..at].iter().chain(&tokens[at..]));
            prop_assert_eq!(chained, crc32fast::hash(&bytes));
            let mut running = TokensCrc::default();
            running.update(&tokens[..at]);
            running.update(&tokens[at..]);
            prop_assert_eq!(running.value(), crc32fast::hash(&bytes));
        }

        #[test]
        fn sqe_round_trips(sqe in sqe_strategy()) {
            let bytes = sqe.encode();
            prop_assert_eq!(Sqe::decode(&bytes, sqe.seq), Ok(sqe));
        }

        #[test]
        fn any_flipped_bit_is_caught(sqe in sqe_strategy(), bit in 0usize..(SQE_LEN * 8)) {
            let mut bytes = sqe.encode();
            bytes[bit / 8] ^= 1 << (bit % 8);
            prop_assert!(Sqe::decode(&bytes, sqe.seq).is_err());
        }

        #[test]
        fn cqe_round_trips(seq: u32, tag: u32, ctx: u16, n: u32, c: u32, us: u32) {
            let cqe = Cqe { seq, tag, ctx, kind: CqeKind::Done, status: CqeStatus::Ok,
                n_tokens: n, crc: c, fabric_us: us, finish: Finish::Length };
            prop_assert_eq!(Cqe::decode(&cqe.encode(), seq), Ok(cqe));
        }

        #[test]
        fn garbage_completion_is_refused(bytes in proptest::array::uniform32(any::<u8>()), seq: u32) {
            // Random bytes pass the CRC with probability 2^-32; either way the
            // decoder must not panic, and an accepted entry must carry `seq`.
            if let Ok(cqe) = Cqe::decode(&bytes, seq) {
                prop_assert_eq!(cqe.seq, seq);
            }
        }
    }

    #[test]
    fn an_old_entry_reads_as_stale() {
        let sqe = Sqe {
            seq: 3,
            opcode: OP_GENERATE,
            slot: 0,
            flags: 0,
            tag: 9,
            ctx: 1,
            prompt_addr: 0x1000,
            prompt_len: 4,
            max_tokens: 8,
            output_addr: 0x2000,
            output_cap: 8,
            temperature: 0.0,
            seed: 1,
            stop_token: NO_STOP_TOKEN,
        };
        let err = Sqe::decode(&sqe.encode(), 3 + 256).expect_err("stale");
        assert!(matches!(
            err,
            DescriptorError::Stale {
                expected: 259,
                found: 3,
                ..
            }
        ));
        let err = Sqe::decode(&[0u8; SQE_LEN], 7).expect_err("zero");
        assert!(matches!(err, DescriptorError::Stale { .. }), "{err}");
    }
}
