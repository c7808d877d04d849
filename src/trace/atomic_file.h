// Atomic file output shared by every writer: the content goes to a temp file in the same folder,
// then rename() replaces the target, so readers never see a half-written report. Every error below is a
// glm5::OutputError (common/error.h) naming the path.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace glm5 {

// Writes `content` to `path` atomically. Throws glm5::Error with one line naming the path and the
// reason (folder missing / not writable / disk full). On failure no file is left behind.
void write_file_atomic(const std::string& path, const std::string& content);

// Several outputs of one run written as one: stage() writes a content to a temp file beside its target (the
// target must not be a folder, device, FIFO or socket; a symbolic link is followed, so its target is replaced
// and the link kept); commit() renames every staged file into place. Nothing is renamed before all
// were staged, so a full disk or a bad target (a folder, a path named twice) fails the run with no new file. If a
// rename fails part way (the checks passed, so rarely), the targets renamed so far are put back as they were
// (the old file restored from a hard link taken before its rename, a new one removed).
// The destructor removes staged files that were not committed. Where the file system allows (O_TMPFILE: ext4, xfs,
// btrfs, tmpfs) a staged file has no name until commit(), so a run killed while it writes (SIGTERM, SIGKILL, a
// crash) leaves nothing behind; elsewhere it is named <target>.tmp.<pid> while it is written.
// Errors: glm5::OutputError naming the target.
class AtomicOutputs {
 public:
  AtomicOutputs() = default;
  AtomicOutputs(const AtomicOutputs&) = delete;
  AtomicOutputs& operator=(const AtomicOutputs&) = delete;
  ~AtomicOutputs();
  void stage(const std::string& path, const std::string& content);
  void commit();

 private:
  struct Staged {
    std::string tmp;   // the temp file's name (named once commit() links an unnamed one; empty once renamed)
    std::string path;  // the target
    int fd = -1;       // an unnamed (O_TMPFILE) file's descriptor until commit() names it
  };
  std::vector<Staged> staged_;
};

// Throws glm5::OutputError unless `dir` exists, is a folder and is writable (checked by creating and
// removing a probe file). Call before a long run so a bad --out fails in the first second.
void require_writable_dir(const std::string& dir);

// Checks, without creating anything, that `dir` exists and is writable or can be created (its nearest
// existing ancestor is a writable folder). Throws glm5::OutputError naming the folder otherwise.
void check_output_dir(const std::string& dir);
// Throws glm5::OutputError when one of `outputs` names the same file as one of `inputs` -- the same path, or another name
// of it (a hard link, a symbolic link, ./x against x) -- since writing that output would replace an input the run
// reads: "output 'O' is the input 'I': choose another <hint>". Paths that are empty or do not exist yet are skipped.
void require_outputs_not_inputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs,
                                const std::string& hint);
// Creates `dir` (and parents) if needed; throws glm5::OutputError naming it on failure.
void create_output_dir(const std::string& dir);

}  // namespace glm5
