// Running out of memory (std::bad_alloc, usually under `ulimit -v`): exit status 4
// (kOutOfMemory) with a message that says what the limit was and how to need less, never
// std::terminate, and no temporary output file left behind.
//
// Why a handler is needed: nlohmann::json's destructor allocates (it moves nested values
// onto a stack to destroy them without recursion) and is noexcept, so a bad_alloc that
// unwinds through JSON values (the HTML page's charts, the JSON reports) ran out of memory
// again in a destructor and ended in std::terminate: exit 134, and `html`'s temporary page
// left (under `ulimit -v` of 80-100 MB, found 2026-12-04). So a failed allocation ends the
// command where it happens.
#pragma once

namespace stepprof::cli {

/// Installs a std::new_handler: an allocation that fails removes the output file being
/// written (set_output_in_progress), prints the message and ends the process with
/// kOutOfMemory at once, from whichever thread it failed on. (Throwing std::bad_alloc
/// instead ended in std::terminate wherever the failure was inside a noexcept function:
/// setting memory aside for the unwinding made it rarer, not impossible.) While a
/// ThrowOnOutOfMemory lives, it throws std::bad_alloc instead, for code that cleans up
/// after itself. Call once, at the start of main.
void install_out_of_memory_handler();

/// While it lives, a failed allocation throws std::bad_alloc (for `synth`, whose output
/// files are removed as the exception unwinds, and which holds no JSON values).
class ThrowOnOutOfMemory {
 public:
  ThrowOnOutOfMemory();
  ~ThrowOnOutOfMemory();
  ThrowOnOutOfMemory(const ThrowOnOutOfMemory&) = delete;
  ThrowOnOutOfMemory& operator=(const ThrowOnOutOfMemory&) = delete;
};

/// Prints "stepprof: out of memory ..." to stderr without allocating: the address-space
/// limit when there is one, and the long-line hint when a line of 64 MB or more was read
/// (byte_source.hpp largest_buffer_bytes).
void print_out_of_memory_message() noexcept;

/// The temporary file being written (write_output_pieces), removed if the process must end
/// in the handler; nullptr when none. The path is copied (at most 4 KiB; a longer one is
/// not registered).
void set_output_in_progress(const char* path) noexcept;

}  // namespace stepprof::cli
