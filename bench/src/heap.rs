//! Heap accounting for the whole bench process: a counting global allocator
//! that knows the bytes in use now and the most in use since the last reset.
//! The API server runs in another process, so these are the client's bytes
//! only, and they do not depend on how loaded the machine is.

use peak_alloc::PeakAlloc;

#[global_allocator]
static HEAP: PeakAlloc = PeakAlloc;

/// Bytes in use now.
pub fn current() -> i64 {
    HEAP.current_usage() as i64
}

/// Waits until the heap stops shrinking (at most two seconds): caches and
/// tasks of the previous measurement are dropped by their own tasks, and
/// their frees must not be counted against the next one.
pub async fn settle() {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(2);
    let mut last = current();
    while std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(25)).await;
        let now = current();
        if now >= last - 4_096 {
            return;
        }
        last = now;
    }
}

/// A window of heap use: bytes in use and the peak, relative to its start.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    start: i64,
}

impl Window {
    /// Starts a window here (and resets the peak to what is in use now).
    pub fn start() -> Self {
        HEAP.reset_peak_usage();
        Window { start: current() }
    }

    /// Forgets the peak so far: [`Window::peak`] then reports the most in
    /// use from now on (still above the window's start).
    pub fn reset_peak(&self) {
        HEAP.reset_peak_usage();
    }

    /// Bytes allocated and not freed since the window started.
    pub fn retained(&self) -> i64 {
        current() - self.start
    }

    /// The most bytes in use at once since the window started, above its start.
    pub fn peak(&self) -> i64 {
        HEAP.peak_usage() as i64 - self.start
    }
}
