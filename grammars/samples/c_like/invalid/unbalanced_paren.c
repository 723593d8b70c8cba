int main(void) {
    if (x > 1 { return 0; }
}
