// main.cc — ratelimit-bench: flag parsing only (CLI11); the work is in bench.cc.
// Bad flags: a message naming the problem and exit status 2.
#include <CLI/CLI.hpp>
#include <iostream>

#include "bench.h"
#include "ratelimit/version.h"

int main(int argc, char** argv) {
  using namespace ratelimit::bench;
  CLI::App app{"ratelimit-bench — exactness and throughput of the ratelimit stores"};
  const auto algorithms = CLI::IsMember({"fixed_window", "sliding_window_log",
                                         "sliding_window_counter", "token_bucket",
                                         "leaky_bucket", "concurrency"});
  app.set_version_flag("--version", ratelimit::version_line("ratelimit-bench"));
  app.require_subcommand(1);

  RaceOptions race;
  auto* r = app.add_subcommand(
      "race", "fire --requests acquires at one fresh key with --concurrency in flight; print "
              "allowed/denied (exactly --limit with the real store; --naive over-admits)");
  r->add_option("--store", race.store,
                "redis://HOST:PORT[/DB], unix:///path or redis-cluster://HOST:PORT[,HOST:PORT...]")->required();
  r->add_option("--requests", race.requests, "acquires to fire")->check(CLI::Range(1, 10'000'000));
  r->add_option("--concurrency", race.concurrency, "acquires in flight")->check(CLI::Range(1, 100'000));
  r->add_option("--limit", race.limit, "the limit (per 60 s window, or bucket size)")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000}));
  r->add_option("--algorithm", race.algorithm,
                "fixed_window, sliding_window_log, sliding_window_counter, token_bucket, "
                "leaky_bucket")
      ->check(algorithms);
  r->add_flag("--naive", race.naive,
              "DEMO ONLY: a non-atomic GET-then-INCR limiter, to show the race it loses");
  r->add_option("--key", race.key, "key to use (default: a fresh random one)");
  r->add_option("--connections", race.connections, "Redis connections (default: the store's)")
      ->check(CLI::Range(size_t{1}, size_t{256}));
  r->add_option("--start-at-unix-ms", race.start_at_unix_ms,
                "wait until this wall-clock time before firing (to line up several processes)");
  r->add_flag("--json", race.json, "print one JSON object instead of text");

  ThroughputOptions tp;
  auto* t = app.add_subcommand("throughput",
                               "closed-loop load through a store: decisions/s, p50/p99 latency");
  t->add_option("--store", tp.store,
                "memory, or redis://HOST:PORT[/DB] / unix:///path / redis-cluster://HOST:PORT,...")->required();
  t->add_option("--algorithm", tp.algorithm, "the algorithm (a limit that never denies)")
      ->check(algorithms);
  t->add_option("--keys", tp.keys, "distinct keys, visited round robin")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));
  t->add_option("--inflight", tp.inflight, "decisions in flight (Redis)")->check(CLI::Range(1, 100'000));
  t->add_option("--threads", tp.threads, "threads calling the memory store")->check(CLI::Range(1, 1024));
  t->add_option("--seconds", tp.seconds, "measured duration")->check(CLI::Range(0.1, 3600.0));
  t->add_option("--warmup", tp.warmup_seconds, "warm-up after one pass over the keys")
      ->check(CLI::Range(0.0, 600.0));
  t->add_option("--connections", tp.connections, "Redis connections (default: the store's)")
      ->check(CLI::Range(size_t{1}, size_t{256}));
  t->add_option("--json-peer", tp.json_peer,
                "also print a JSON line in the peers' result format, with this peer name");
  t->add_option("--server-pid", tp.server_pid,
                "report this process' CPU use (the Redis server's, from /proc/PID/stat) over the "
                "measured window, and its CPU microseconds per decision")
      ->check(CLI::Range(1, 1 << 22));
  t->add_flag("--no-functions", tp.no_functions,
              "Redis: EVALSHA only, never FCALL (RedisStoreOptions::use_functions = false)");
  t->add_option("--max-batch", tp.max_batch, "Redis: decisions per call (1: no batching)")
      ->check(CLI::Range(size_t{1}, size_t{1024}));

  RlsOptions rl;
  auto* g = app.add_subcommand(
      "rls", "closed-loop gRPC load on ratelimitd's Envoy ShouldRateLimit: decisions/s, p50/p99");
  g->add_option("--target", rl.target, "host:port of ratelimitd's gRPC listener");
  g->add_option("--domain", rl.domain, "the request's domain");
  g->add_option("--key", rl.key, "the descriptor entry's key");
  g->add_option("--keys", rl.keys, "distinct entry values, visited round robin")
      ->check(CLI::Range(int64_t{1}, int64_t{10'000'000}));
  g->add_option("--inflight", rl.inflight, "calls in flight")->check(CLI::Range(1, 100'000));
  g->add_option("--seconds", rl.seconds, "measured duration")->check(CLI::Range(0.1, 3600.0));
  g->add_option("--warmup", rl.warmup_seconds, "warm-up before measuring")->check(CLI::Range(0.0, 600.0));
  g->add_option("--json-peer", rl.json_peer,
                "also print a JSON line in the peers' result format, with this peer name");
  g->add_option("--workload", rl.workload, "the JSON line's workload name (default rls.c<inflight>)");
  g->add_flag("--full-stack", rl.full_stack,
              "gRPC's default client stack (retries, client-side deadline timer, message-size and "
              "compression filters); by default they are off, so the client costs less per call "
              "than the server it measures");

  RlqsOptions rq;
  auto* q = app.add_subcommand(
      "rlqs", "a fleet of Envoy quota clients on ratelimitd's RLQS (StreamRateLimitQuotas): reports/s, "
              "p50/p99 of report -> answer");
  q->add_option("--target", rq.target, "host:port of ratelimitd's gRPC listener");
  q->add_option("--domain", rq.domain, "the streams' domain");
  q->add_option("--streams", rq.streams, "Envoy clients, one stream each")->check(CLI::Range(1, 100'000));
  q->add_option("--channels", rq.channels, "HTTP/2 connections shared by the streams (0: one per stream)")
      ->check(CLI::Range(0, 100'000));
  q->add_option("--buckets", rq.buckets, "buckets per report")->check(CLI::Range(int64_t{1}, int64_t{10'000}));
  q->add_option("--bucket-space", rq.bucket_space,
                "distinct buckets over all streams (0: every stream reports the same --buckets)")
      ->check(CLI::Range(int64_t{0}, int64_t{10'000'000}));
  q->add_option("--interval", rq.interval, "seconds between a stream's reports (0: as fast as answered)")
      ->check(CLI::Range(0.0, 60.0));
  q->add_option("--seconds", rq.seconds, "measured duration")->check(CLI::Range(0.1, 3600.0));
  q->add_option("--warmup", rq.warmup_seconds, "warm-up before measuring")->check(CLI::Range(0.0, 600.0));
  q->add_option("--json-peer", rq.json_peer, "also print a JSON line with this peer name");
  q->add_option("--workload", rq.workload, "the JSON line's workload name");

  AdaptiveOptions ad;
  auto* d = app.add_subcommand(
      "adaptive", "a backend of N workers behind ratelimitd's leases, driven open loop (unloaded, loaded, "
                  "loaded with half the workers): goodput, p50/p99, the learned limit");
  d->add_option("--target", ad.target, "host:port of ratelimitd's HTTP listener")->capture_default_str();
  d->add_option("--policy", ad.policy, "the concurrency policy")->capture_default_str();
  d->add_option("--key", ad.key, "the lease key")->capture_default_str();
  d->add_option("--workers", ad.workers, "the backend's workers")->check(CLI::Range(2, 1000))->capture_default_str();
  d->add_option("--service-ms", ad.service_ms, "each request's service time")->check(CLI::Range(0.1, 10'000.0))
      ->capture_default_str();
  d->add_option("--jitter", ad.jitter, "service times vary uniformly by this share")->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  d->add_option("--timeout-ms", ad.timeout_ms, "an answer later than this is not goodput (released as timeout)")
      ->check(CLI::Range(1.0, 600'000.0))->capture_default_str();
  d->add_option("--unloaded", ad.unloaded, "the first phase's load (x capacity)")->check(CLI::Range(0.01, 100.0))
      ->capture_default_str();
  d->add_option("--load", ad.load, "the loaded phases' load (x capacity; given twice: the last)")
      ->check(CLI::Range(0.01, 100.0))->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->capture_default_str();
  d->add_option("--unloaded-seconds", ad.unloaded_seconds)->check(CLI::Range(1.0, 3600.0))->capture_default_str();
  d->add_option("--loaded-seconds", ad.loaded_seconds)->check(CLI::Range(1.0, 3600.0))->capture_default_str();
  d->add_option("--halved-seconds", ad.halved_seconds, "0: no phase with half the workers (given twice: the last)")
      ->check(CLI::Range(0.0, 3600.0))->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)->capture_default_str();
  d->add_option("--clients", ad.clients, "client threads (one connection each)")->check(CLI::Range(1, 10'000))
      ->capture_default_str();
  d->add_option("--seed", ad.seed, "the arrivals' random seed")->capture_default_str();
  d->add_option("--critical-share", ad.critical_share,
                "arrivals name a priority class: critical with this probability, else sheddable")
      ->check(CLI::Range(0.0, 1.0));
  d->add_flag("--json", ad.json, "also print one JSON line with every figure and the limit per second");

  EvalshaArgsOptions ea;
  auto* e = app.add_subcommand(
      "evalsha-args", "load the scripts into Redis and print the EVALSHA arguments of one "
                      "decision (for redis-benchmark)");
  e->add_option("--store", ea.store, "redis://HOST:PORT[/DB]")->required();
  e->add_option("--algorithm", ea.algorithm, "the algorithm")->check(algorithms);
  e->add_option("--keys", ea.keys, "1, or N for a key with __rand_int__ (redis-benchmark -r N)")
      ->check(CLI::Range(int64_t{1}, int64_t{100'000'000}));

  try {
    app.parse(argc, argv);
  } catch (const CLI::Success& help_or_version) {  // --help, --version
    return app.exit(help_or_version);
  } catch (const CLI::ParseError& err) {
    std::cerr << "ratelimit-bench: " << err.what() << "\nRun 'ratelimit-bench --help' for usage.\n";
    return 2;
  }
  if (r->parsed()) return run_race(race);
  if (t->parsed()) return run_throughput(tp);
  if (g->parsed()) return run_rls(rl);
  if (q->parsed()) return run_rlqs(rq);
  if (d->parsed()) return run_adaptive(ad);
  return run_evalsha_args(ea);
}
