package bench.spring.jdbc;

import org.springframework.beans.factory.annotation.Value;
import org.springframework.boot.http.client.HttpComponentsClientHttpRequestFactoryBuilder;
import org.springframework.boot.http.client.autoconfigure.ClientHttpRequestFactoryBuilderCustomizer;
import org.springframework.context.annotation.Bean;
import org.springframework.context.annotation.Configuration;

/**
 * Apache HttpClient 5's connection pool, used only when {@code spring.http.clients.imperative.factory=http-components}
 * (the remedy row; the defaults run the JDK client). Its own default is 5 connections per route and 25 in all
 * ({@code PoolingHttpClientConnectionManagerBuilder}); Boot has no property for it, and its reference shows a
 * {@link ClientHttpRequestFactoryBuilderCustomizer} for what the properties do not cover.
 */
@Configuration(proxyBeanMethods = false)
class DownstreamClient {

    @Bean
    ClientHttpRequestFactoryBuilderCustomizer<HttpComponentsClientHttpRequestFactoryBuilder> downstreamPool(
            @Value("${bench.downstream.pool-size:0}") int size) {
        return builder -> size <= 0 ? builder
                : builder.withConnectionManagerCustomizer(pool -> pool.setMaxConnTotal(size).setMaxConnPerRoute(size));
    }
}
