package bench.spring.jdbc;

import org.junit.jupiter.api.Test;

import org.springframework.beans.factory.annotation.Autowired;
import org.springframework.boot.http.client.ClientHttpRequestFactoryBuilder;
import org.springframework.boot.test.context.SpringBootTest;
import org.springframework.http.client.JdkClientHttpRequestFactory;

import static org.assertj.core.api.Assertions.assertThat;

/** GET /feed's client at the defaults: the JDK's HttpClient, although Apache HttpClient 5 (which Boot would pick
 * first) is on the class path for the remedy row. */
@SpringBootTest(webEnvironment = SpringBootTest.WebEnvironment.NONE)
class DownstreamClientDefaultTest {

    @Autowired
    ClientHttpRequestFactoryBuilder<?> builder;

    @Test
    void theJdkClient() {
        assertThat(builder.build()).isInstanceOf(JdkClientHttpRequestFactory.class);
    }
}
