package bench.spring.webflux;

import org.junit.jupiter.api.Test;

import reactor.netty.resources.ConnectionProvider;

import static org.assertj.core.api.Assertions.assertThat;

/** The sized rows' pool: BENCH_DOWNSTREAM_POOL_SIZE connections, twice as many pending acquisitions. */
class DownstreamPoolTest {

    @Test
    void sizedPool() {
        ConnectionProvider pool = Downstream.pool(7);
        try {
            assertThat(pool.maxConnections()).isEqualTo(7);
        }
        finally {
            pool.dispose();
        }
    }
}
