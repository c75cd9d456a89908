//! Giving a flood's memory back: [`FloodTrim`].
//!
//! A server that serves connections on many threads (tokio's runtime threads, a thread per
//! connection) allocates and frees their memory in glibc's per-thread arenas, and glibc keeps
//! what an arena freed for that arena's next allocations. After floods of connections the
//! resident size therefore creeps towards the largest flood times the number of arenas (up to
//! 8 per core), though every byte was freed: a tokio server with 16 threads went from 6 to
//! 299 MB over ten floods of 5000 idle connections, the echo server from 5 to 141 MB over
//! three floods of 2000. `malloc_trim` gives the free pages back; [`FloodTrim`] calls it once
//! a flood has drained, never in the steady state.

/// Decides when to trim the heap: once the connections open have fallen to half of a flood
/// of at least [`FloodTrim::FLOOD`], and once more [`FloodTrim::AGAIN`] checks later (a
/// connection counted as closed may still be freeing its memory: a thread's last frees come
/// after its count). Call [`FloodTrim::check`] now and then (every 50–200 ms) from a thread
/// that is otherwise idle.
#[derive(Debug, Default)]
pub(crate) struct FloodTrim {
    /// Most connections open since the last trim.
    high: usize,
    /// Checks left until the trim that follows a flood's trim (0: none pending).
    again: u32,
}

impl FloodTrim {
    /// Floods smaller than this are not worth a trim.
    pub const FLOOD: usize = 256;
    /// Checks between a flood's trim and the one that follows it.
    pub const AGAIN: u32 = 10;

    /// Whether a trim is due with `open` connections open now (and records it as done).
    fn due(&mut self, open: usize) -> bool {
        self.high = self.high.max(open);
        if self.high >= Self::FLOOD && open <= self.high / 2 {
            self.high = open;
            self.again = Self::AGAIN;
            true
        } else if self.again > 0 {
            self.again -= 1;
            self.again == 0
        } else {
            false
        }
    }

    /// Trims the heap (`malloc_trim`) when a flood has fallen to half; true when it did.
    pub fn check(&mut self, open: usize) -> bool {
        let due = self.due(open);
        if due {
            socklab_sys::mem::trim_heap();
        }
        due
    }
}

#[cfg(test)]
mod tests {
    use super::FloodTrim;

    #[test]
    fn trims_as_a_flood_drains_and_not_in_the_steady_state() {
        let mut t = FloodTrim::default();
        fn trims(t: &mut FloodTrim, opens: &[usize]) -> Vec<usize> {
            opens.iter().filter(|&&o| t.due(o)).copied().collect()
        }
        // A steady 200 connections, up and down: never.
        assert!(trims(&mut t, &[0, 50, 200, 100, 10, 200, 0, 150]).is_empty());
        // A flood of 1000 that drains to 500 and stays: at half, and once more AGAIN checks
        // later (for memory freed after the count fell).
        let mut drain = vec![1000, 800, 500];
        drain.extend(std::iter::repeat_n(500, FloodTrim::AGAIN as usize + 5));
        assert_eq!(trims(&mut t, &drain), vec![500, 500]);
        // It drains on to 0: at 250 (half of 500), once more later, then nothing.
        let mut rest = vec![400, 250];
        rest.extend(std::iter::repeat_n(0, FloodTrim::AGAIN as usize + 20));
        assert_eq!(trims(&mut t, &rest), vec![250, 0]);
        // Steady small again: never.
        assert!(trims(&mut t, &[100, 0, 200, 0]).is_empty());
    }
}
