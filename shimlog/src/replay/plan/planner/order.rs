//! The plan builder's part that orders threads (see ../planner.rs's doc): thread starts and
//! exits become Spawn and Join ops in the stream of a thread alive at that point (or the
//! child's main thread's list), and an op another thread will wait for is flagged NOTIFY in
//! place.
use super::super::*;
use super::{Planner, ThreadBuild};
use recorder::{Event, Op};
use std::os::unix::fs::FileExt;

impl Planner<'_> {
    pub(super) fn thread(&mut self, e: &Event) -> Result<u32, String> {
        if let Some(&t) = self.by_stream.get(&e.stream) {
            return Ok(t);
        }
        let t = self.threads.len() as u32;
        let index = self.life_next;
        self.life_next += 1;
        self.threads.push(ThreadBuild {
            plan: ThreadPlan { stream: e.stream, tid: e.tid, first_ts_ns: e.ts_ns, ..ThreadPlan::default() },
            buf: Vec::new(),
            prev_ts: 0,
            free_slots: Vec::new(),
            start_index: index,
            exited: false,
        });
        self.by_stream.insert(e.stream, t);
        self.alive += 1;
        self.meta.peak_threads = self.meta.peak_threads.max(self.alive);
        let host = self.last_caller.filter(|&h| !self.threads[h as usize].exited);
        match host {
            Some(h) => {
                let o = PlanOp {
                    action: Action::Spawn as u8,
                    op: Op::ThreadStart as u8,
                    ts_ns: e.ts_ns,
                    slot: t,
                    count: index as u64,
                    ..PlanOp::default()
                };
                self.push(h, &o)?;
            }
            None => self.meta.control.push(LifeOp { start: true, thread: t, index }),
        }
        Ok(t)
    }

    /// Gives the exits waiting for a joiner to thread `t` (alive at each of them), in order,
    /// before its next op.
    pub(super) fn take_joins(&mut self, t: u32) -> Result<(), String> {
        let start = self.threads[t as usize].start_index;
        let mut i = 0;
        while i < self.pending_joins.len() {
            let (j, index) = self.pending_joins[i];
            if index > start {
                self.pending_joins.remove(i);
                let o = PlanOp {
                    action: Action::Join as u8,
                    op: Op::ThreadExit as u8,
                    ts_ns: self.threads[t as usize].prev_ts,
                    slot: j,
                    count: index as u64,
                    ..PlanOp::default()
                };
                self.encode_op(t, &o)?;
            } else {
                i += 1;
            }
        }
        Ok(())
    }

    /// Flags the op whose tag lies at `pos` of chunk `chunk` of thread `t` [`NOTIFY`]: in
    /// the thread's buffer when it is still there, else in the plan file.
    pub(super) fn notify(&mut self, t: u32, chunk: u32, pos: u32) -> Result<(), String> {
        let th = &mut self.threads[t as usize];
        if chunk as usize == th.plan.chunks.len() {
            th.buf[pos as usize] |= NOTIFY;
            return Ok(());
        }
        let at = th.plan.chunks[chunk as usize].offset + pos as u64;
        let mut b = [0u8; 1];
        self.file.read_exact_at(&mut b, at).map_err(|e| format!("reading back the replay plan: {e}"))?;
        b[0] |= NOTIFY;
        self.file.write_all_at(&b, at).map_err(|e| format!("writing the replay plan: {e}"))
    }
}
