// mutex.h — locks the compiler can check: Clang's thread-safety annotations (RL_GUARDED_BY,
// RL_REQUIRES, ...) and a Mutex / MutexLock pair that carries them.
//
// Why: libstdc++'s std::mutex and std::lock_guard carry no capability attributes, so Clang's
// -Wthread-safety cannot see them. Every mutex-guarded member in src/ is declared
// `T x RL_GUARDED_BY(mu_);` with `Mutex mu_;`, and every function that expects a lock held says
// RL_REQUIRES(mu_); the `clang` preset (CMakePresets.json, built by scripts/test) compiles with
// -Wthread-safety -Werror, so touching a guarded member without its lock fails the build. Under
// GCC the macros expand to nothing and Mutex is a std::mutex with the same cost.
//
// Condition variables: MutexLock holds a std::unique_lock<std::mutex>, and its wait(),
// wait_for() and wait_until() wait on a std::condition_variable with it. They take no
// predicate: a predicate lambda is analysed as a function of its own that holds no lock, so
// callers loop (`while (!ready_) lock.wait(cv_);`) in the scope that holds it.
//
// The RL_ prefix: Debian's abseil (which grpc++ headers include) defines the bare names.
//
// Header-only, not installed (src/common is on the include path of every target of this
// project through ratelimit_warnings). Thread-safety: Mutex is a mutex; a MutexLock belongs to
// the thread that made it.
#pragma once

#include <chrono>
#include <condition_variable>
#include <mutex>

#if defined(__clang__)
#define RATELIMIT_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define RATELIMIT_THREAD_ANNOTATION(x)
#endif

// A type that is a lock (Mutex, SpinLock).
#define RL_CAPABILITY(x) RATELIMIT_THREAD_ANNOTATION(capability(x))
// An RAII type that holds a lock for its lifetime (MutexLock).
#define RL_SCOPED_CAPABILITY RATELIMIT_THREAD_ANNOTATION(scoped_lockable)
// A member read or written only with the lock held.
#define RL_GUARDED_BY(x) RATELIMIT_THREAD_ANNOTATION(guarded_by(x))
// A pointer member whose pointee is accessed only with the lock held.
#define RL_PT_GUARDED_BY(x) RATELIMIT_THREAD_ANNOTATION(pt_guarded_by(x))
// A function its callers call with the lock(s) held.
#define RL_REQUIRES(...) RATELIMIT_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
// A function that takes / gives back the lock(s).
#define RL_ACQUIRE(...) RATELIMIT_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define RL_RELEASE(...) RATELIMIT_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RL_TRY_ACQUIRE(...) RATELIMIT_THREAD_ANNOTATION(try_acquire_capability(__VA_ARGS__))
// A function that takes the lock itself, so its callers must not hold it.
#define RL_EXCLUDES(...) RATELIMIT_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
// A function that returns a reference to the lock it names.
#define RL_RETURN_CAPABILITY(x) RATELIMIT_THREAD_ANNOTATION(lock_returned(x))
// Opts one function out of the analysis; say why beside it.
#define RL_NO_THREAD_SAFETY_ANALYSIS RATELIMIT_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace ratelimit {

// std::mutex with capability attributes. Not recursive.
class RL_CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void lock() RL_ACQUIRE() { mu_.lock(); }
  void unlock() RL_RELEASE() { mu_.unlock(); }
  [[nodiscard]] bool try_lock() RL_TRY_ACQUIRE(true) { return mu_.try_lock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex from construction to destruction (or to unlock()); waits on condition
// variables with it.
class RL_SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex& mu) RL_ACQUIRE(mu) : lock_(mu.mu_) {}
  ~MutexLock() RL_RELEASE() {}
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

  // Gives the lock back early / takes it again (the destructor releases only if held).
  void unlock() RL_RELEASE() { lock_.unlock(); }
  void lock() RL_ACQUIRE() { lock_.lock(); }

  // Releases the lock while blocked on `cv`, holds it again on return (also on a spurious
  // wake-up: callers loop on their condition).
  void wait(std::condition_variable& cv) { cv.wait(lock_); }
  template <typename Rep, typename Period>
  std::cv_status wait_for(std::condition_variable& cv,
                          const std::chrono::duration<Rep, Period>& timeout) {
    return cv.wait_for(lock_, timeout);
  }
  template <typename Clock, typename Duration>
  std::cv_status wait_until(std::condition_variable& cv,
                            const std::chrono::time_point<Clock, Duration>& deadline) {
    return cv.wait_until(lock_, deadline);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

// Holds any annotated lock (SpinLock) for the scope, like std::lock_guard.
template <typename Lock>
class RL_SCOPED_CAPABILITY ScopedLock {
 public:
  explicit ScopedLock(Lock& lock) RL_ACQUIRE(lock) : lock_(lock) { lock_.lock(); }
  ~ScopedLock() RL_RELEASE() { lock_.unlock(); }
  ScopedLock(const ScopedLock&) = delete;
  ScopedLock& operator=(const ScopedLock&) = delete;

 private:
  Lock& lock_;
};

}  // namespace ratelimit
