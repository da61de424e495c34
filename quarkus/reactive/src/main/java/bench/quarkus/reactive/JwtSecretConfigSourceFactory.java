package bench.quarkus.reactive;

import java.nio.charset.StandardCharsets;
import java.util.Base64;
import java.util.List;
import java.util.Map;
import java.util.OptionalInt;

import org.eclipse.microprofile.config.spi.ConfigSource;

import io.smallrye.config.ConfigSourceContext;
import io.smallrye.config.ConfigSourceFactory;
import io.smallrye.config.ConfigValue;
import io.smallrye.config.PropertiesConfigSource;

/**
 * smallrye-jwt reads an HMAC verification key only as a JWK, while the benchmark hands every
 * port the raw secret in {@code JWT_SECRET}. This factory turns {@code bench.jwt.secret} (see
 * application.properties) into the {@code smallrye.jwt.verify.secretkey} JWK
 * {"kty":"oct","k":"base64url(UTF-8 bytes of the secret)"}.
 */
public class JwtSecretConfigSourceFactory implements ConfigSourceFactory {

    @Override
    public Iterable<ConfigSource> getConfigSources(ConfigSourceContext context) {
        ConfigValue secret = context.getValue("bench.jwt.secret");
        if (secret == null || secret.getValue() == null) {
            return List.of();
        }
        String k = Base64.getUrlEncoder().withoutPadding()
                .encodeToString(secret.getValue().getBytes(StandardCharsets.UTF_8));
        String jwk = "{\"kty\":\"oct\",\"k\":\"" + k + "\"}";
        return List.of(new PropertiesConfigSource(Map.of("smallrye.jwt.verify.secretkey", jwk), "jwt-secret-jwk", 150));
    }

    @Override
    public OptionalInt getPriority() {
        return OptionalInt.of(150);
    }
}
