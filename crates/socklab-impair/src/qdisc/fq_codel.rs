//! FQ-CoDel, RFC 8290 (section 4, and Linux's `sch_fq_codel` where the RFC leaves a choice):
//! packets are hashed by their 5-tuple (keyed, as Linux perturbs its hash) into `flows` queues;
//! a queue that becomes active joins the list of new flows with a quantum of credit; dequeue
//! serves new flows before old ones by deficit round robin (a flow whose credit is spent gets a
//! quantum more and moves to the end of the old flows), each flow queue running its own CoDel
//! over the whole discipline's backlog. A new flow that empties moves to the old flows (so it
//! cannot jump ahead again at once); an old flow that empties leaves the lists.
//!
//! Beyond `limit` packets (all flows together), the packet at the head of the flow with the
//! most bytes queued is dropped, one for each packet over the limit (Linux drops a batch of up
//! to 64 at once to save CPU; the RFC describes one).

use std::collections::VecDeque;

use super::codel::{codel_dequeue, Backlog, CodelVars};
use super::{Ctx, Entry};
use crate::aqm::FqCodelConfig;

#[derive(Debug, Clone, Default)]
struct Flow {
    q: VecDeque<Entry>,
    bytes: u64,
    deficit: i64,
    vars: CodelVars,
    /// In the new or the old list.
    listed: bool,
}

/// The FQ-CoDel discipline.
#[derive(Debug, Clone)]
pub(crate) struct FqCodel {
    cfg: FqCodelConfig,
    flows: Vec<Flow>,
    new_flows: VecDeque<u32>,
    old_flows: VecDeque<u32>,
    len: usize,
    bytes: u64,
    maxpacket: u64,
    limit: usize,
    key: u64,
}

/// One flow's queue, keeping the discipline's totals.
struct FlowQueue<'a> {
    q: &'a mut VecDeque<Entry>,
    flow_bytes: &'a mut u64,
    len: &'a mut usize,
    bytes: &'a mut u64,
    maxpacket: u64,
}

impl Backlog for FlowQueue<'_> {
    fn pop(&mut self) -> Option<Entry> {
        let e = self.q.pop_front()?;
        let n = e.bytes.len() as u64;
        *self.flow_bytes -= n;
        *self.bytes -= n;
        *self.len -= 1;
        Some(e)
    }
    fn bytes(&self) -> u64 {
        *self.bytes
    }
    fn maxpacket(&self) -> u64 {
        self.maxpacket
    }
}

impl FqCodel {
    pub(crate) fn new(cfg: FqCodelConfig, limit: usize, key: u64) -> FqCodel {
        FqCodel {
            flows: vec![Flow::default(); cfg.flows as usize],
            cfg,
            new_flows: VecDeque::new(),
            old_flows: VecDeque::new(),
            len: 0,
            bytes: 0,
            maxpacket: 0,
            limit,
            key,
        }
    }

    /// The flow queue a packet belongs to: its keyed 5-tuple hash scaled to the number of
    /// queues (Linux's `reciprocal_scale`); packets that are not IP (or not parsed, `ip`
    /// false) share queue 0.
    pub(crate) fn classify(&self, bytes: &[u8], ip: bool) -> u32 {
        let h = if ip {
            crate::ip::flow_hash(bytes, self.key).unwrap_or(0)
        } else {
            0
        };
        (((h >> 32) * u64::from(self.cfg.flows)) >> 32) as u32
    }

    pub(crate) fn enqueue(&mut self, now: u64, e: Entry, ctx: &mut Ctx<'_>) {
        let idx = self.classify(&e.bytes, ctx.ip);
        let n = e.bytes.len() as u64;
        self.maxpacket = self.maxpacket.max(n);
        let flow = &mut self.flows[idx as usize];
        flow.q.push_back(e);
        flow.bytes += n;
        self.len += 1;
        self.bytes += n;
        if !flow.listed {
            flow.listed = true;
            flow.deficit = i64::from(self.cfg.quantum);
            self.new_flows.push_back(idx);
        }
        if self.len > self.limit {
            self.drop_from_fattest(now, ctx);
        }
    }

    /// Drops the head packet of the flow with the most bytes queued.
    fn drop_from_fattest(&mut self, now: u64, ctx: &mut Ctx<'_>) {
        let Some((i, _)) = self
            .flows
            .iter()
            .enumerate()
            .max_by_key(|(i, f)| (f.bytes, std::cmp::Reverse(*i)))
        else {
            return;
        };
        let flow = &mut self.flows[i];
        if let Some(e) = flow.q.pop_front() {
            let n = e.bytes.len() as u64;
            flow.bytes -= n;
            self.bytes -= n;
            self.len -= 1;
            ctx.queue_drop(now, e);
        }
    }

    pub(crate) fn dequeue(&mut self, now: u64, ctx: &mut Ctx<'_>) -> Option<Entry> {
        loop {
            let (from_new, idx) = match (self.new_flows.front(), self.old_flows.front()) {
                (Some(&i), _) => (true, i),
                (None, Some(&i)) => (false, i),
                (None, None) => return None,
            };
            let flow = &mut self.flows[idx as usize];
            if flow.deficit <= 0 {
                flow.deficit += i64::from(self.cfg.quantum);
                self.unlist_head(from_new);
                self.old_flows.push_back(idx);
                continue;
            }
            let mut fq = FlowQueue {
                q: &mut flow.q,
                flow_bytes: &mut flow.bytes,
                len: &mut self.len,
                bytes: &mut self.bytes,
                maxpacket: self.maxpacket,
            };
            if let Some(e) = codel_dequeue(&mut flow.vars, &self.cfg.codel, now, &mut fq, ctx) {
                flow.deficit -= e.bytes.len() as i64;
                return Some(e);
            }
            self.unlist_head(from_new);
            // A new flow that empties goes to the old ones (if there are any) so that it
            // cannot come back as new at once; an old one leaves the lists.
            if from_new && !self.old_flows.is_empty() {
                self.old_flows.push_back(idx);
            } else {
                self.flows[idx as usize].listed = false;
            }
        }
    }

    fn unlist_head(&mut self, from_new: bool) {
        if from_new {
            self.new_flows.pop_front();
        } else {
            self.old_flows.pop_front();
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }
}
