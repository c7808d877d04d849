#include "trace/atomic_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "common/error.h"

namespace glm5 {

namespace fs = std::filesystem;

namespace {
std::string parent_of(const std::string& path) {
  fs::path p = fs::path(path).parent_path();
  return p.empty() ? std::string(".") : p.string();
}
}  // namespace

void require_writable_dir(const std::string& dir) {
  std::error_code ec;
  if (!fs::exists(dir, ec)) throw OutputError("output folder '" + dir + "' does not exist");
  if (!fs::is_directory(dir, ec)) throw OutputError("output folder '" + dir + "' is not a folder");
  if (access(dir.c_str(), W_OK | X_OK) != 0)
    throw OutputError("output folder '" + dir + "' is not writable: " + std::strerror(errno));
}

void require_outputs_not_inputs(const std::vector<std::string>& outputs, const std::vector<std::string>& inputs,
                                const std::string& hint) {
  for (const std::string& out : outputs)
    for (const std::string& in : inputs) {
      std::error_code ec;  // (equivalent() is false with an error when either path does not exist)
      if (!out.empty() && !in.empty() && fs::equivalent(out, in, ec))
        throw OutputError("output '" + out + "' is the input '" + in + "': choose another " + hint);
    }
}

void check_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p = fs::absolute(fs::path(dir), ec);
  if (ec) throw OutputError("output folder '" + dir + "': " + ec.message());
  // The folder itself, or the nearest existing ancestor it would be created in, must be writable.
  while (!fs::exists(p, ec)) {
    if (!p.has_parent_path() || p.parent_path() == p) throw OutputError("output folder '" + dir + "' cannot be created");
    p = p.parent_path();
  }
  require_writable_dir(p.string());
  const fs::path target = fs::absolute(fs::path(dir), ec);
  if (p != target && !fs::is_directory(p, ec))
    throw OutputError("output folder '" + dir + "' cannot be created under '" + p.string() + "'");
  // Probe the missing levels: create them now and remove them again, so a path the OS refuses (/proc/x, a name
  // longer than NAME_MAX) fails here, before the run, not when the outputs are written after it (bad-input
  // review, session 16). A failed run still leaves no folder behind.
  std::vector<fs::path> missing;  // innermost first
  for (fs::path q = target; q != p && q.has_parent_path() && q.parent_path() != q; q = q.parent_path()) missing.push_back(q);
  std::vector<fs::path> made;
  std::string why;
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (!fs::create_directory(*it, ec) || ec) {
      why = ec ? ec.message() : "it appeared meanwhile";
      break;
    }
    made.push_back(*it);
  }
  for (auto it = made.rbegin(); it != made.rend(); ++it) fs::remove(*it, ec);
  if (!why.empty()) throw OutputError("output folder '" + dir + "' cannot be created: " + why);
}

void create_output_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw OutputError("cannot create output folder '" + dir + "': " + ec.message());
  require_writable_dir(dir);
}

AtomicOutputs::~AtomicOutputs() {
  for (const Staged& f : staged_) {
    if (f.fd >= 0) ::close(f.fd);  // unnamed: the file system frees it
    else if (!f.tmp.empty()) std::remove(f.tmp.c_str());
  }
}

void AtomicOutputs::stage(const std::string& user_path, const std::string& content) {
  std::error_code ec;
  // A symbolic link is written through: its target gets the new content and the link stays a link (a rename onto
  // the link's own path would replace the link by a regular file). Resolved before any check.
  // Followed link by link (read_symlink), so a link to a file not yet created resolves too; a chain longer than
  // 40 links (the kernel's ELOOP limit) is refused.
  const fs::path given = fs::absolute(user_path, ec);
  fs::path link = given;
  for (int hops = 0; !ec && fs::is_symlink(fs::symlink_status(link, ec)); ++hops) {
    const fs::path to = fs::read_symlink(link, ec);
    if (hops == 40 || ec) throw OutputError("cannot write '" + user_path + "': its symbolic link cannot be resolved");
    link = to.is_absolute() ? to : link.parent_path() / to;
  }
  const std::string path = link == given ? user_path : link.lexically_normal().string();
  const std::string dir = parent_of(path);
  require_writable_dir(dir);
  const fs::file_status st = fs::status(path, ec);
  if (fs::is_directory(st)) throw OutputError("cannot write '" + user_path + "': it is a folder");
  // A device, FIFO or socket is refused: the rename would replace it by a regular file (run as root, --md
  // /dev/null replaced the machine's /dev/null; bad-input review, session 18), and writing into it directly is not
  // atomic and can block (a FIFO without a reader).
  if (fs::exists(st) && !fs::is_regular_file(st))
    throw OutputError("cannot write '" + user_path + "': not a regular file (a device, FIFO or socket); outputs are written "
                "to a temp file beside their target and renamed over it");
  const fs::path canon = fs::weakly_canonical(fs::absolute(path, ec), ec);
  for (const Staged& f : staged_)
    if (fs::weakly_canonical(fs::absolute(f.path, ec), ec) == canon)
      throw OutputError("cannot write '" + user_path + "': it is named twice among this run's outputs");
  Staged f{path + ".tmp." + std::to_string(getpid()), path, -1};
  // Unnamed until commit() (bad-input attack, session 31: a SIGTERM while a 144 MB report was written left a 23 MB
  // report.json.tmp.<pid>); a file system without O_TMPFILE gets the named temp file.
  int fd = ::open(dir.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0666);
  const bool unnamed = fd >= 0;
  if (!unnamed) fd = ::open(f.tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
  if (fd < 0) throw OutputError("cannot write '" + path + "': " + std::strerror(errno));
  if (unnamed) f.fd = fd;
  staged_.push_back(f);  // removed (or closed) by the destructor unless committed
  for (size_t done = 0; done < content.size();) {
    const ssize_t n = ::write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      const int e = n < 0 ? errno : EIO;
      if (!unnamed) ::close(fd);
      throw OutputError("cannot write '" + path + "': " + std::strerror(e));
    }
    done += size_t(n);
  }
  if (!unnamed && ::close(fd) != 0) throw OutputError("cannot write '" + path + "': " + std::strerror(errno));
}

void AtomicOutputs::commit() {
  // A target that exists is kept as a hard link (path.bak.PID) until every rename succeeded, so a failure part
  // way puts the old files back; a target that did not exist is removed again.
  struct Done {
    std::string path, backup;  // backup empty: the target did not exist
  };
  std::vector<Done> done;
  auto roll_back = [&] {
    for (const Done& d : done)
      if (d.backup.empty()) std::remove(d.path.c_str());
      else std::rename(d.backup.c_str(), d.path.c_str());
  };
  // Unnamed files get their temp names first (through /proc/self/fd, the way open(2) documents for O_TMPFILE).
  for (Staged& f : staged_) {
    if (f.fd < 0) continue;
    std::remove(f.tmp.c_str());
    const std::string proc = "/proc/self/fd/" + std::to_string(f.fd);
    int rc = ::linkat(AT_FDCWD, proc.c_str(), AT_FDCWD, f.tmp.c_str(), AT_SYMLINK_FOLLOW);
    if (rc != 0) rc = ::linkat(f.fd, "", AT_FDCWD, f.tmp.c_str(), AT_EMPTY_PATH);  // no /proc: needs the capability
    const int e = errno;
    ::close(f.fd);
    f.fd = -1;
    if (rc != 0) {
      f.tmp.clear();
      throw OutputError("cannot write '" + f.path + "' (naming the temp file failed): " + std::strerror(e));
    }
  }
  for (size_t i = 0; i < staged_.size(); ++i) {
    const std::string& tmp = staged_[i].tmp;
    const std::string& path = staged_[i].path;
    std::error_code ec;
    std::string backup;
    if (fs::exists(path, ec)) {
      backup = path + ".bak." + std::to_string(getpid());
      std::remove(backup.c_str());
      if (::link(path.c_str(), backup.c_str()) != 0) backup.clear();  // no hard links here: no restore for it
    }
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
      const int e = errno;
      if (!backup.empty()) std::remove(backup.c_str());
      roll_back();
      throw OutputError("cannot write '" + path + "' (rename of the temp file failed): " + std::strerror(e));
    }
    done.push_back({path, backup});
    staged_[i].tmp.clear();
  }
  for (const Done& d : done)
    if (!d.backup.empty()) std::remove(d.backup.c_str());
  staged_.clear();
}

void write_file_atomic(const std::string& path, const std::string& content) {
  AtomicOutputs out;
  out.stage(path, content);
  out.commit();
}

}  // namespace glm5
