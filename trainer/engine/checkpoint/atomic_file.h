#pragma once
// Durable file replacement that never shows a partial file where the target lives: the
// bytes go to a temporary "<name>.tmp<pid>" in a staging directory beside the target's
// directory on the same filesystem ("<parent>/.<dir name>.partial/"), are fsync'ed, then
// renamed over the target, and the directory is fsync'ed. A crash leaves either the old
// file or the new one. Why beside, not inside: SageMaker uploads the checkpoint directory
// to S3 continuously, partial files included, so a write in progress must not be in it.
// When the staging directory cannot be made on the target's filesystem (the directory is
// a mount point, or its parent is read-only), the temporary goes into the target's
// directory as before.
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace mrcnn::engine {

// Throws std::runtime_error naming the path and the failing call (with errno text).
void WriteFileAtomically(const std::filesystem::path& path, std::string_view bytes);

// The staging directory WriteFileAtomically uses for files in `dir`.
std::filesystem::path StagingDirFor(const std::filesystem::path& dir);

// Removes temporaries "<name_prefix>*.tmp<pid>" left in `dir` and its staging directory by
// a writer that is gone: its process no longer exists, or it is this process (a restarted
// container reuses PIDs, and this process has not written yet when it calls this).
// Returns what was removed.
std::vector<std::filesystem::path> RemoveStaleTemporaries(const std::filesystem::path& dir,
                                                          const std::string& name_prefix);

// Reads a whole file; throws naming the path.
std::string ReadWholeFile(const std::filesystem::path& path);

}  // namespace mrcnn::engine
