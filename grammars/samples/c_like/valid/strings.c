// Counting characters in a string.
int count(const char *s, char c);

int count(const char *s, char c) {
    int n = 0;
    while (*s) {
        if (*s == c && c != '\0') n += 1;
        s++;
    }
    return n;
}

int main(void) {
    char *msg = "hello, \"world\"\n";
    int table[4] = {1, 2, 0x1F, 4};
    int total = count(msg, 'l') + table[2] * -3 % 7;
    return total > 10 || !total;
}
