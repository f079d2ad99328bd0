// rls_e2e_test.cc — Envoy's rate-limit API as a user of ratelimitd sees it: the real
// build/bin/ratelimitd started on free loopback ports with `grpc_listen` and `domains` in its
// YAML, asked over real gRPC by a C++ client (the generated stubs of proto/).
//
// What it asserts: the response as Envoy reads it (statuses in request order, overall_code,
// current_limit with name, limit_remaining, duration_until_reset, unlimited, no match, unknown
// domain, the RateLimit-* headers); precise status codes for bad requests, and that a bad
// request counts nothing; health; a SIGHUP reload that changes a limit; and exactness under
// concurrency — 200 RPCs in flight on one descriptor at 10 per minute give exactly 10 OK on the
// memory store, on Redis, and with two ratelimitd processes sharing one Redis.
// Every wait is bounded (gRPC deadlines of 10 s, Daemon's own bounds); each daemon is killed by
// pid when its Daemon object dies.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <atomic>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon.h"
#include "eventually.h"
#include "envoy/service/ratelimit/v3/rls.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "redis_server.h"
#include "rls_client.h"
#include "rls_daemon.h"

namespace ratelimit::grpc_api {
namespace {

using namespace ratelimit::grpc_test;  // NOLINT: the shared test client

std::string config_yaml(const std::string& store, int per_user, bool headers) {
  std::string y = "store: " + store + "\n";
  y += "grpc_listen: 127.0.0.1:0\n";
  if (headers) y += "envoy_api: { response_headers: true, ietf_headers: true }\n";
  y += R"(domains:
  - domain: edge
    descriptors:
      - key: user
        rate_limit: { unit: minute, requests_per_unit: )" +
       std::to_string(per_user) + R"(, name: per_user }
      - key: vip
        rate_limit: { unlimited: true }
      - key: remote_address
        descriptors:
          - key: path
            value: /login
            rate_limit: { unit: hour, requests_per_unit: 2 }
)";
  return y;
}

std::string memory_store() { return "{ type: memory }"; }

// A store block on the shared test Redis, with a key prefix of its own (so runs never share
// counts) unless `prefix` is given.
std::string redis_store(const std::string& prefix) {
  auto url = ratelimit::testing::shared_test_redis_url();
  EXPECT_TRUE(url.ok()) << url.status().to_string();
  return "{ type: redis, url: \"" + (url.ok() ? *url : std::string()) + "\", key_prefix: \"" +
         prefix + "\", command_timeout: 2s }";
}

std::string fresh_prefix() { return "rltest:grpc-e2e:" + std::to_string(std::random_device{}()) + ":"; }



::grpc::Status call(Server& s, const RateLimitRequest& req, RateLimitResponse& resp) {
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return s.stub->ShouldRateLimit(&ctx, req, &resp);
}

std::map<std::string, std::string> headers_of(const RateLimitResponse& r) {
  std::map<std::string, std::string> h;
  for (const auto& kv : r.response_headers_to_add()) h[kv.key()] = kv.value();
  return h;
}

// Envoy's view of a sequence of calls on one configuration with per_user = 10.
void check_answers(Server& s, const std::string& user) {
  RateLimitResponse r;
  const auto req = make_request("edge", {{{"user", user}},
                                    {{"vip", "x"}},
                                    {{"nothing", "here"}},
                                    {{"remote_address", "10.0.0.1"}, {"path", "/login"}},
                                    {{"remote_address", "10.0.0.1"}}});
  ASSERT_TRUE(call(s, req, r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
  ASSERT_EQ(r.statuses_size(), 5);  // one per descriptor, in request order
  const auto& u = r.statuses(0);
  EXPECT_EQ(u.code(), RateLimitResponse::OK);
  EXPECT_EQ(u.current_limit().name(), "per_user");
  EXPECT_EQ(u.current_limit().requests_per_unit(), 10U);
  EXPECT_EQ(u.current_limit().unit(), RateLimitResponse::RateLimit::MINUTE);
  EXPECT_EQ(u.limit_remaining(), 9U);
  EXPECT_GE(u.duration_until_reset().seconds(), 1);  // to the end of the epoch-aligned minute
  EXPECT_LE(u.duration_until_reset().seconds(), 60);
  EXPECT_EQ(r.statuses(1).code(), RateLimitResponse::OK);  // unlimited
  EXPECT_EQ(r.statuses(1).limit_remaining(), 4294967295U);
  EXPECT_FALSE(r.statuses(1).has_current_limit());
  EXPECT_EQ(r.statuses(2).code(), RateLimitResponse::OK);  // matches nothing
  EXPECT_FALSE(r.statuses(2).has_current_limit());
  EXPECT_EQ(r.statuses(3).current_limit().unit(), RateLimitResponse::RateLimit::HOUR);
  EXPECT_EQ(r.statuses(3).limit_remaining(), 1U);
  EXPECT_FALSE(r.statuses(4).has_current_limit());  // remote_address alone has no limit
  // The headers of the descriptor closest to its limit: the login path (1 left).
  auto h = headers_of(r);
  EXPECT_EQ(h["RateLimit-Limit"], "2");
  EXPECT_EQ(h["RateLimit-Remaining"], "1");
  EXPECT_GE(std::atoi(h["RateLimit-Reset"].c_str()), 1);
  EXPECT_LE(std::atoi(h["RateLimit-Reset"].c_str()), 3600);
  // The IETF fields of the same descriptor (an unnamed rule: named by its key).
  EXPECT_EQ(h["RateLimit-Policy"], "\"edge.remote_address.path_/login\";q=2;w=3600");
  EXPECT_EQ(h["RateLimit"], "\"edge.remote_address.path_/login\";r=1;t=" + h["RateLimit-Reset"]);

  // Nine more on the user: at its limit; the next one is over, and so is the request.
  const auto only_user = make_request("edge", {{{"user", user}}});
  for (int i = 0; i < 9; ++i) ASSERT_TRUE(call(s, only_user, r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0U);
  ASSERT_TRUE(call(s, only_user, r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).code(), RateLimitResponse::OVER_LIMIT);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 0U);
  h = headers_of(r);
  EXPECT_EQ(h["RateLimit-Limit"], "10");
  EXPECT_EQ(h["RateLimit-Remaining"], "0");
  EXPECT_EQ(h["RateLimit-Policy"], "\"per_user\";q=10;w=60");
  // An unknown domain: OK, nothing applies (envoyproxy/ratelimit answers the same).
  ASSERT_TRUE(call(s, make_request("elsewhere", {{{"user", user}}}), r).ok());
  EXPECT_EQ(r.overall_code(), RateLimitResponse::OK);
  ASSERT_EQ(r.statuses_size(), 1);
  EXPECT_FALSE(r.statuses(0).has_current_limit());
}

// 200 asynchronous RPCs in flight at once on one descriptor, spread over `servers`.
void expect_exactly_ten_of_200(const std::vector<Server*>& servers, const std::string& user) {
  std::vector<RateLimitService::Stub*> stubs;
  for (Server* s : servers) stubs.push_back(s->stub.get());
  const CallCounts c = concurrent_calls(stubs, make_request("edge", {{{"user", user}}}), 200);
  EXPECT_EQ(c.ok, 10);
  EXPECT_EQ(c.over, 190);
  EXPECT_EQ(c.failed, 0);
}

TEST(RlsE2e, AnswersAsEnvoyReadsItOnTheMemoryStore) {
  Server s;
  ASSERT_TRUE(s.start(config_yaml(memory_store(), 10, true)));
  check_answers(s, "alice");
}

TEST(RlsE2e, BadRequestsGetPreciseCodesAndCountNothing) {
  Server s;
  ASSERT_TRUE(s.start(config_yaml(memory_store(), 10, false)));
  RateLimitResponse r;
  auto status = [&](const RateLimitRequest& req) { return call(s, req, r); };
  struct Case {
    const char* what;
    RateLimitRequest req;
    ::grpc::StatusCode code;
    const char* message;  // a part of the status message
  };
  std::vector<Case> cases;
  cases.push_back({"empty domain", make_request("", {{{"user", "a"}}}), ::grpc::StatusCode::INVALID_ARGUMENT,
                   "rate limit domain must not be empty"});
  cases.push_back({"no descriptors", make_request("edge", {}), ::grpc::StatusCode::INVALID_ARGUMENT,
                   "rate limit descriptor list must not be empty"});
  cases.push_back({"descriptor without entries", make_request("edge", {{{"user", "a"}}, {}}),
                   ::grpc::StatusCode::INVALID_ARGUMENT, "descriptor 1 has no entries"});
  cases.push_back({"empty key", make_request("edge", {{{"", "a"}}}), ::grpc::StatusCode::INVALID_ARGUMENT,
                   "descriptor 0 entry 0: the key must not be empty"});
  cases.push_back({"empty value", make_request("edge", {{{"user", ""}}}), ::grpc::StatusCode::INVALID_ARGUMENT,
                   "the value must not be empty"});
  std::vector<Entries> many(65, Entries{{"user", "a"}});
  cases.push_back({"65 descriptors", make_request("edge", many), ::grpc::StatusCode::INVALID_ARGUMENT,
                   "at most 64 descriptors per request, got 65"});
  auto bad_unit = make_request("edge", {{{"user", "a"}}});
  bad_unit.mutable_descriptors(0)->mutable_limit()->set_requests_per_unit(5);  // unit UNKNOWN
  cases.push_back({"override with unit UNKNOWN", bad_unit, ::grpc::StatusCode::INVALID_ARGUMENT,
                   "limit override has unit 0"});
  auto huge_hits = make_request("edge", {{{"user", "a"}}});
  huge_hits.mutable_descriptors(0)->mutable_hits_addend()->set_value(5'000'000'000ULL);
  cases.push_back({"hits_addend above the cap", huge_hits, ::grpc::StatusCode::INVALID_ARGUMENT,
                   "hits_addend 5000000000 is above"});
  cases.push_back({"message above 64 KiB", make_request("edge", {{{"user", std::string(100'000, 'x')}}}),
                   ::grpc::StatusCode::RESOURCE_EXHAUSTED, ""});
  for (const Case& c : cases) {
    const ::grpc::Status st = status(c.req);
    EXPECT_EQ(st.error_code(), c.code) << c.what << ": " << st.error_message();
    EXPECT_NE(st.error_message().find(c.message), std::string::npos) << c.what << ": " << st.error_message();
  }
  // A call whose deadline has already passed is not decided.
  {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() - std::chrono::seconds(1));
    EXPECT_EQ(s.stub->ShouldRateLimit(&ctx, make_request("edge", {{{"user", "a"}}}), &r).error_code(),
              ::grpc::StatusCode::DEADLINE_EXCEEDED);
  }
  // None of the above counted anything on user "a".
  ASSERT_TRUE(call(s, make_request("edge", {{{"user", "a"}}}), r).ok());
  EXPECT_EQ(r.statuses(0).limit_remaining(), 9U);
}

TEST(RlsE2e, HealthCheck) {
  Server s;
  ASSERT_TRUE(s.start(config_yaml(memory_store(), 10, false)));
  auto health = ::grpc::health::v1::Health::NewStub(s.channel);
  for (const std::string name : {"", "envoy.service.ratelimit.v3.RateLimitService"}) {
    ::grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    ::grpc::health::v1::HealthCheckRequest req;
    req.set_service(name);
    ::grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok()) << name;
    EXPECT_EQ(resp.status(), ::grpc::health::v1::HealthCheckResponse::SERVING) << name;
  }
  ::grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  ::grpc::health::v1::HealthCheckRequest req;
  req.set_service("no.such.Service");
  ::grpc::health::v1::HealthCheckResponse resp;
  EXPECT_EQ(health->Check(&ctx, req, &resp).error_code(), ::grpc::StatusCode::NOT_FOUND);
}

TEST(RlsE2e, SighupReloadServesTheNewDomains) {
  Server s;
  ASSERT_TRUE(s.start(config_yaml(memory_store(), 10, false)));
  RateLimitResponse r;
  ASSERT_TRUE(call(s, make_request("edge", {{{"user", "reload"}}}), r).ok());
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 10U);
  s.daemon.rewrite_config(config_yaml(memory_store(), 3, false));
  s.daemon.signal(SIGHUP);
  ASSERT_TRUE(s.daemon.wait_log("reload ok", std::chrono::seconds(10))) << s.daemon.log();
  ASSERT_TRUE(call(s, make_request("edge", {{{"user", "reload2"}}}), r).ok());
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 3U);
  EXPECT_EQ(r.statuses(0).limit_remaining(), 2U);
  // A bad set of domains is refused whole; the running one keeps serving.
  s.daemon.rewrite_config("grpc_listen: 127.0.0.1:0\ndomains:\n  - domain: edge\n    descriptors:\n"
                          "      - key: user\n        rate_limit: { unit: fortnight, requests_per_unit: 1 }\n");
  s.daemon.signal(SIGHUP);
  ASSERT_TRUE(s.daemon.wait_log("reload failed", std::chrono::seconds(10))) << s.daemon.log();
  ASSERT_TRUE(call(s, make_request("edge", {{{"user", "reload3"}}}), r).ok());
  EXPECT_EQ(r.statuses(0).current_limit().requests_per_unit(), 3U);
}

// A configuration whose native policy `p` and Envoy rule `edge.user` both have limit `limit`,
// and `fillers` more descriptor rules (so that building Envoy's rules takes a measurable time: a
// reload that published them apart from the policies would leave a window to observe).
std::string twin_limits_yaml(int limit, int fillers, bool bad_policy = false, bool bad_rule = false) {
  std::string y = "grpc_listen: 127.0.0.1:0\npolicies:\n  p: { algorithm: fixed_window, limit: " +
                  std::to_string(limit) + ", window: " + (bad_policy ? "-1s" : "60s") +
                  " }\ndomains:\n  - domain: edge\n    descriptors:\n      - { key: user, rate_limit: { unit: " +
                  (bad_rule ? "fortnight" : "minute") + ", requests_per_unit: " + std::to_string(limit) + " } }\n";
  for (int i = 0; i < fillers; ++i) {
    y += "      - { key: f" + std::to_string(i) + ", rate_limit: { unit: second, requests_per_unit: 1 } }\n";
  }
  return y;
}

// A SIGHUP publishes the native policies and Envoy's descriptor rules in one swap: one client,
// asking its questions one after the other while the daemon reloads 8 times, never sees one
// API on a newer configuration than an API it asks afterwards (with two swaps, a native answer
// on the new limits followed by an Envoy answer on the old ones shows up within the first
// reloads). A bad file — a bad policy beside good rules, or bad rules beside a good policy —
// changes neither.
TEST(RlsE2e, ReloadSwapsPoliciesAndDescriptorRulesTogether) {
  constexpr int kFillers = 4'000;
  constexpr int kReloads = 8;
  constexpr int kBase = 1000;
  Server s;
  ASSERT_TRUE(s.start(twin_limits_yaml(kBase, kFillers)));
  e2e::Client http(s.daemon.port());
  ASSERT_TRUE(http.connected());
  const auto req = make_request("edge", {{{"user", "u"}}});
  const auto native = [&]() -> int {
    const e2e::Reply r = http.post("/v1/peek", R"({"key":"u","policy":"p"})");
    return r.status == 200 ? static_cast<int>(r.json().at("limit").as_int64()) : -1;
  };
  const auto envoy = [&]() -> int {
    RateLimitResponse r;
    return call(s, req, r).ok() ? static_cast<int>(r.statuses(0).current_limit().requests_per_unit()) : -1;
  };
  ASSERT_EQ(native(), kBase);
  ASSERT_EQ(envoy(), kBase);

  std::atomic<bool> stop{false};
  std::atomic<int> failed{0};
  std::vector<std::string> mixed;  // "native N, then envoy M" with M < N, or the reverse
  int mixed_count = 0;
  int probes = 0, moved = 0;
  std::atomic<int> seen{kBase};  // the newest limit the prober has read
  std::thread prober([&] {
    int last = kBase;
    for (bool native_first = true; !stop.load(); native_first = !native_first, ++probes) {
      const int a = native_first ? native() : envoy();
      const int b = native_first ? envoy() : native();
      if (a < 0 || b < 0) {
        failed.fetch_add(1);
        continue;
      }
      if (b < a && ++mixed_count <= 10) {
        mixed.push_back(std::string(native_first ? "native " : "envoy ") + std::to_string(a) +
                        (native_first ? ", then envoy " : ", then native ") + std::to_string(b));
      }
      if (b != last) ++moved;
      last = b;
      if (b > seen.load()) seen.store(b);
    }
  });
  for (int g = 1; g <= kReloads; ++g) {
    s.daemon.rewrite_config(twin_limits_yaml(kBase + g, kFillers));
    s.daemon.signal(SIGHUP);
    if (!s.daemon.wait_log("reload ok: generation " + std::to_string(g + 1) + ",", std::chrono::seconds(20))) {
      ADD_FAILURE() << "reload " << g << " not logged:\n" << s.daemon.log();
      break;
    }
    // The next reload only once the prober has read this one (not after a guessed 20 ms: a
    // starved prober thread would then see too few reloads to say anything).
    if (!testing::eventually([&] { return seen.load() >= kBase + g; })) {
      ADD_FAILURE() << "the prober never read generation " << g + 1;
      break;
    }
  }
  stop = true;
  prober.join();
  EXPECT_EQ(failed.load(), 0);
  EXPECT_EQ(mixed_count, 0) << "mixed answers, e.g. " << mixed.front();
  EXPECT_GE(moved, kReloads / 2) << "the prober saw too few reloads to say anything (" << probes << " probes)";
  EXPECT_EQ(native(), kBase + kReloads);
  EXPECT_EQ(envoy(), kBase + kReloads);

  // Refused whole: a good policy change with bad rules, and good rules with a bad policy.
  int refused = 0;
  for (const auto& [bad_policy, bad_rule] : {std::pair{false, true}, std::pair{true, false}}) {
    s.daemon.rewrite_config(twin_limits_yaml(kBase + 50, 0, bad_policy, bad_rule));
    s.daemon.signal(SIGHUP);
    ++refused;
    // Each refusal is told apart from the one before by its count.
    const std::string counted = "ratelimitd_config_reloads_total{result=\"error\"} " + std::to_string(refused) + "\n";
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (http.get("/metrics").body.find(counted) == std::string::npos) {
      ASSERT_LT(std::chrono::steady_clock::now(), deadline) << "refusal " << refused << " not counted:\n" << s.daemon.log();
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    EXPECT_EQ(native(), kBase + kReloads) << "bad_policy " << bad_policy << " bad_rule " << bad_rule;
    EXPECT_EQ(envoy(), kBase + kReloads) << "bad_policy " << bad_policy << " bad_rule " << bad_rule;
  }
  EXPECT_NE(s.daemon.log().find("reload failed"), std::string::npos);
}

TEST(RlsE2e, ExactlyTenOf200ConcurrentOnTheMemoryStore) {
  Server s;
  ASSERT_TRUE(s.start(config_yaml(memory_store(), 10, false)));
  expect_exactly_ten_of_200({&s}, "hot");
}

TEST(RlsE2e, RedisStoreAnswersAlikeAndExactly) {
  Server s;
  ASSERT_TRUE(s.start(config_yaml(redis_store(fresh_prefix()), 10, true)));
  check_answers(s, "bob");
  expect_exactly_ten_of_200({&s}, "hot");
}

TEST(RlsE2e, TwoDaemonsSharingOneRedisAdmitExactlyTenInTotal) {
  const std::string store = redis_store(fresh_prefix());
  Server a, b;
  ASSERT_TRUE(a.start(config_yaml(store, 10, false)));
  ASSERT_TRUE(b.start(config_yaml(store, 10, false)));
  expect_exactly_ten_of_200({&a, &b}, "shared");
}

// The benchmark's load generator against the real server (short: it checks the tool works,
// not its speed): every call answered, nothing over the limit of 10^9 per second.
TEST(RlsE2e, BenchRlsModeRunsAgainstTheServer) {
  Server s;
  ASSERT_TRUE(s.start(R"(grpc_listen: 127.0.0.1:0
domains:
  - domain: bench
    descriptors:
      - key: user
        rate_limit: { unit: second, requests_per_unit: 1000000000 }
)"));
  const std::string cmd = std::string("timeout 30 ") + RATELIMIT_BIN_DIR +
                          "/ratelimit-bench rls --target 127.0.0.1:" + std::to_string(s.grpc_port) +
                          " --inflight 20 --seconds 0.5 --warmup 0.1 --json-peer t 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  ASSERT_NE(p, nullptr);
  std::string out;
  char buf[512];
  while (fgets(buf, sizeof buf, p) != nullptr) out += buf;
  const int rc = pclose(p);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("over_limit=0 errors=0"), std::string::npos) << out;
  EXPECT_NE(out.find("\"workload\": \"rls.c20\""), std::string::npos) << out;
}

}  // namespace
}  // namespace ratelimit::grpc_api
