// The file operations fluxion's readers and writers share, on POSIX system calls: a file's kind and
// size, creating directories, listing and removing files, and the atomic write every writer uses
// (checkpoints, safetensors, npy). They stand in for <filesystem>, whose header alone cost every
// program that includes <fluxion/fluxion.hpp> about 0.2 s of compile time.
//
//   const auto info = fx::io::detail::stat_path("x.npy");   // kind, size, errno
//   fx::io::detail::atomic_write("save_npy", "x.npy", {header, data});
#pragma once

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../core/error.hpp"

namespace fluxion::io::detail {

[[noreturn]] inline void file_fail(const std::string& op, const std::string& path, const std::string& what) {
  throw io_error(op + ": '" + path + "': " + what);
}

/// strerror(code) as a std::string.
inline std::string error_text(int code) { return std::strerror(code); }

enum class file_kind { missing, regular, directory, other };

struct file_info {
  file_kind kind = file_kind::missing;
  std::uint64_t size = 0;
  int error = 0;  // errno of a failed stat other than "no such file" (kind is then missing)
};

/// What is at `path`: stat(2), or lstat(2) when follow_links is false (a dangling link then exists).
inline file_info stat_path(const std::string& path, bool follow_links = true) {
  struct ::stat st {};
  file_info info;
  if ((follow_links ? ::stat(path.c_str(), &st) : ::lstat(path.c_str(), &st)) != 0) {
    if (errno != ENOENT && errno != ENOTDIR) info.error = errno;
    return info;
  }
  info.kind = S_ISREG(st.st_mode) ? file_kind::regular : S_ISDIR(st.st_mode) ? file_kind::directory : file_kind::other;
  info.size = static_cast<std::uint64_t>(st.st_size);
  return info;
}

/// Throws op's io_error unless `path` is a file that can be read: "no such file", "is a directory,
/// not <what>", or the system's reason. Returns its size in bytes.
inline std::uint64_t readable_file_size(const std::string& op, const std::string& path, const char* what) {
  const file_info info = stat_path(path);
  if (info.error) file_fail(op, path, "cannot open the file: " + error_text(info.error));
  if (info.kind == file_kind::missing) file_fail(op, path, "no such file");
  if (info.kind == file_kind::directory) file_fail(op, path, std::string("is a directory, not ") + what);
  return info.size;
}

/// `directory`/`name`, without a doubled '/'.
inline std::string join_path(const std::string& directory, const std::string& name) {
  if (directory.empty()) return name;
  return directory.back() == '/' ? directory + name : directory + "/" + name;
}

/// The directory part of `path` (filesystem::path::parent_path): "a/b" -> "a", "b" -> "", "/b" -> "/".
inline std::string parent_directory(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  if (slash == std::string::npos) return {};
  const std::size_t end = path.find_last_not_of('/', slash);
  return end == std::string::npos ? std::string("/") : path.substr(0, end + 1);
}

/// The part of `path` after its last '/'.
inline std::string file_name_part(const std::string& path) {
  const std::size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

/// mkdir -p: creates `path` and its missing parents. Returns 0, or the errno of the first failure
/// (ENOTDIR when a component exists and is not a directory).
inline int make_directories(const std::string& path) {
  if (path.empty()) return 0;
  for (std::size_t end = path.find('/', 1);; end = path.find('/', end + 1)) {
    const std::string part = path.substr(0, end);
    if (!part.empty() && part.back() != '/') {
      if (::mkdir(part.c_str(), 0777) != 0) {
        const int code = errno;
        if (code != EEXIST) return code;
        if (stat_path(part).kind != file_kind::directory) return ENOTDIR;
      }
    }
    if (end == std::string::npos) return 0;
  }
}

/// unlink(2); a file already gone is not an error. Returns 0 or errno.
inline int remove_file(const std::string& path) { return ::unlink(path.c_str()) == 0 || errno == ENOENT ? 0 : errno; }

/// The names in `directory` (not "." and ".."), in the order readdir gives. Returns 0 or errno
/// (ENOENT for a missing directory).
inline int list_directory(const std::string& directory, std::vector<std::string>& names) {
  DIR* dir = ::opendir(directory.c_str());
  if (!dir) return errno;
  for (;;) {
    errno = 0;
    const ::dirent* entry = ::readdir(dir);
    if (!entry) break;
    const std::string_view name(entry->d_name);
    if (name != "." && name != "..") names.emplace_back(name);
  }
  const int code = errno;
  ::closedir(dir);
  return code;
}

/// The whole file, read with one system call loop; a missing file or a directory (not `what`, "a
/// safetensors file") is named as such. safetensors::load and csv_logger's resume read with it.
inline std::string read_whole_file(const std::string& op, const std::string& path, const char* what) {
  struct ::stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) file_fail(op, path, "no such file");
    file_fail(op, path, std::string("cannot open the file: ") + std::strerror(errno));
  }
  if (S_ISDIR(st.st_mode)) file_fail(op, path, std::string("is a directory, not ") + what);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) file_fail(op, path, std::string("cannot open the file: ") + std::strerror(errno));
  std::string bytes;
  bytes.resize(static_cast<std::size_t>(st.st_size));
  std::size_t have = 0;
  for (;;) {
    if (have == bytes.size()) bytes.resize(std::max<std::size_t>(4096, bytes.size() * 2));  // the file may grow
    const ::ssize_t n = ::read(fd, bytes.data() + have, bytes.size() - have);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int saved = errno;
      ::close(fd);
      file_fail(op, path, std::string("cannot read the file: ") + std::strerror(saved));
    }
    if (n == 0) break;
    have += static_cast<std::size_t>(n);
  }
  ::close(fd);
  bytes.resize(have);
  return bytes;
}

/// Writes `pieces` to `path` atomically: a temporary file in the same directory (hidden, so that no
/// directory scan takes it for a complete file), written, fsynced and closed, renamed over `path`,
/// then the directory fsynced so that the rename itself survives a power loss. On failure the
/// temporary file is removed, `path` is as it was, and op's io_error names the step that failed.
inline void atomic_write(const std::string& op, const std::string& path, const std::vector<std::string_view>& pieces) {
  static std::atomic<std::uint64_t> counter{0};
  const std::string parent = parent_directory(path);
  const std::string dir = parent.empty() ? std::string(".") : parent;
  const std::string temporary = join_path(parent, "." + file_name_part(path) + ".tmp-" + std::to_string(::getpid()) +
                                                      "-" + std::to_string(counter.fetch_add(1)));
  auto system_error = [&](const std::string& what) {
    const std::string reason = std::strerror(errno);
    ::unlink(temporary.c_str());
    file_fail(op, path, what + ": " + reason);
  };
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) file_fail(op, path, "cannot create the temporary file '" + temporary + "': " + std::strerror(errno));
  for (std::string_view piece : pieces) {
    while (!piece.empty()) {
      const ::ssize_t n = ::write(fd, piece.data(), piece.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        const int saved = errno;
        ::close(fd);
        errno = saved;
        system_error("cannot write the temporary file '" + temporary + "'");
      }
      piece.remove_prefix(static_cast<std::size_t>(n));
    }
  }
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    errno = saved;
    system_error("cannot fsync the temporary file '" + temporary + "'");
  }
  if (::close(fd) != 0) system_error("cannot close the temporary file '" + temporary + "'");
  if (::rename(temporary.c_str(), path.c_str()) != 0)
    system_error("cannot rename the temporary file '" + temporary + "' into place");
  const int dir_fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) file_fail(op, path, "cannot open the directory '" + dir + "' to fsync it: " + std::strerror(errno));
  const int synced = ::fsync(dir_fd);
  const int saved = errno;
  ::close(dir_fd);
  if (synced != 0) file_fail(op, path, "cannot fsync the directory '" + dir + "': " + std::strerror(saved));
}

}  // namespace fluxion::io::detail
