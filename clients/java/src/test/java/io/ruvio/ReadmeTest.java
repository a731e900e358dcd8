package io.ruvio;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.nio.file.Files;
import java.nio.file.Path;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import org.junit.jupiter.api.Test;

/**
 * README.md's first example is, line for line, the lease snippet that {@link SnippetTest#leaseSnippet()} compiles
 * and runs against a real server: the example a reader copies cannot drift from code that works. (Maven runs tests
 * in the module's folder, where README.md is.)
 */
class ReadmeTest {
    @Test
    void firstExampleIsTheSnippetSnippetTestRuns() throws Exception {
        Matcher block = Pattern.compile("```java\\n(.*?)```", Pattern.DOTALL).matcher(Files.readString(Path.of("README.md")));
        assertTrue(block.find(), "README.md has a java example");
        String readme = block.group(1);

        String source = Files.readString(Path.of("src/test/java/io/ruvio/SnippetTest.java"));
        Matcher body = Pattern.compile("void leaseSnippet\\(\\) \\{\\n(.*?)\\n\\n        // What the comments promise:", Pattern.DOTALL)
                .matcher(source);
        assertTrue(body.find(), "SnippetTest.leaseSnippet's snippet not found");
        StringBuilder snippet = new StringBuilder();
        for (String line : body.group(1).split("\n", -1)) {
            snippet.append(line.startsWith("        ") ? line.substring(8) : line).append('\n');
        }
        assertEquals(snippet.toString(), readme);
    }
}
