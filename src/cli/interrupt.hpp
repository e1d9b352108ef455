// Ctrl-C for long-running subcommands: the first SIGINT (or SIGTERM, or SIGHUP when the
// terminal closes) sets a flag that
// readers and writers poll, so the command stops cleanly, removes partial output and
// exits with status 130 (128 + SIGINT, as shells report a command killed by Ctrl-C).
// A second signal, 100 ms or more after the first, ends the process at once with the
// same message and status; one sooner is the first delivered twice (timeout(1) signals
// the command and then its process group) and is ignored. (The default action used to
// be restored after the first, so `timeout -s INT` ended the command by its second
// signal, with status 130 and no message.)
#pragma once

#include <atomic>

namespace stepprof::cli {

/// Exit status after an interruption.
inline constexpr int kInterrupted = 130;

/// Installs the handler (idempotent).
void install_interrupt_handler();

/// True once SIGINT, SIGTERM or SIGHUP arrived.
[[nodiscard]] bool interrupted();

/// From now until disarm_exit_on_interrupt(), an interrupt ends the process at once with
/// kInterrupted and "stepprof: interrupted" on stderr, instead of setting the flag: for
/// the analyses, which do not poll it (a what-if or trace of a large input runs for
/// minutes) and write nothing, so nothing is left half-written. An interrupt that came
/// before is acted on here.
void arm_exit_on_interrupt();
/// Back to setting the flag (write_output calls it before it writes a regular file
/// through a temporary one, which an interrupt must remove).
void disarm_exit_on_interrupt();

/// The flag itself, for code that takes a `const std::atomic<bool>*` (ReadOptions::cancel).
const std::atomic<bool>* interrupt_flag();

}  // namespace stepprof::cli
