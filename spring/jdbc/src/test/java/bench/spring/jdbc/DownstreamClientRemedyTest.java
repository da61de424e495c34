package bench.spring.jdbc;

import java.lang.reflect.Field;

import org.apache.hc.client5.http.impl.io.PoolingHttpClientConnectionManager;
import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.http.client.ClientHttpRequestFactoryBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.http.client.ClientHttpRequestFactory;
import org.springframework.http.client.HttpComponentsClientHttpRequestFactory;

import static org.assertj.core.api.Assertions.assertThat;

/** The remedy row's settings: Apache HttpClient 5, its pool at bench.downstream.pool-size (BENCH_DOWNSTREAM_POOL_SIZE)
 * instead of HttpClient 5's own 5 connections per route. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.NONE,
        properties = {"spring.http.clients.imperative.factory=http-components", "bench.downstream.pool-size=7"})
class DownstreamClientRemedyTest {

    @Autowired
    ClientHttpRequestFactoryBuilder<?> builder;

    @Test
    void apacheHttpClientWithItsPoolSized() throws Exception {
        ClientHttpRequestFactory factory = builder.build();
        assertThat(factory).isInstanceOf(HttpComponentsClientHttpRequestFactory.class);
        // the pool is not exposed: read it from the client HttpClient 5 built (InternalHttpClient.connManager)
        Object client = ((HttpComponentsClientHttpRequestFactory) factory).getHttpClient();
        Field field = client.getClass().getDeclaredField("connManager");
        field.setAccessible(true);
        PoolingHttpClientConnectionManager pool = (PoolingHttpClientConnectionManager) field.get(client);
        assertThat(pool.getMaxTotal()).isEqualTo(7);
        assertThat(pool.getDefaultMaxPerRoute()).isEqualTo(7);
    }
}
