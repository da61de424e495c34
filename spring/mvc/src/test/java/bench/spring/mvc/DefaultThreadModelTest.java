package bench.spring.mvc;

import org.junit.jupiter.api.Test;

import static org.assertj.core.api.Assertions.assertThat;

/** With no profile given, the app is spring-platform: platform Tomcat worker threads. */
class DefaultThreadModelTest extends ThreadModelTest {

    @Test
    void noProfileMeansPlatformThreads() throws Exception {
        Thread thread = handlingThread();

        assertThat(thread.isVirtual()).as("%s is virtual", thread).isFalse();
        assertThat(thread.getName()).startsWith("http-nio-").contains("-exec-");
    }
}
