// The go-redis adapter, a module of its own so that the ratelimit module does not require
// go-redis. NOT COMPILED OR TESTED HERE: go-redis is not packaged in Debian and this project's
// machines use no module proxy. Written to go-redis v9's documented API (Cmdable.Do,
// Cmd.Result, the redis.Error interface).
module ratelimit/goredis

go 1.19

require (
	github.com/redis/go-redis/v9 v9.7.0
	ratelimit v0.0.0
)

replace ratelimit => ../
