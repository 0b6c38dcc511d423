-- sqlenv demo database: library
-- A small public library: authors, their books, registered members and loans.

CREATE TABLE authors (
    author_id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    birth_year INTEGER,
    nationality TEXT
);

CREATE TABLE books (
    book_id INTEGER PRIMARY KEY,
    title TEXT NOT NULL,
    author_id INTEGER NOT NULL REFERENCES authors(author_id),
    genre TEXT NOT NULL,
    published_year INTEGER,
    pages INTEGER,
    price REAL
);

CREATE TABLE members (
    member_id INTEGER PRIMARY KEY,
    first_name TEXT NOT NULL,
    last_name TEXT NOT NULL,
    email TEXT,
    city TEXT NOT NULL,
    joined_date TEXT NOT NULL,
    membership_type TEXT NOT NULL
);

CREATE TABLE loans (
    loan_id INTEGER PRIMARY KEY,
    book_id INTEGER NOT NULL,
    member_id INTEGER NOT NULL,
    loan_date TEXT NOT NULL,
    due_date TEXT NOT NULL,
    return_date TEXT,
    fine REAL,
    FOREIGN KEY (book_id) REFERENCES books(book_id),
    FOREIGN KEY (member_id) REFERENCES members(member_id)
);

INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (1, 'Maren Holloway', 1962, 'British');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (2, 'Tobias Quint', 1975, 'American');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (3, 'Ana de la Vega', 1981, 'Spanish');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (4, 'Kenji Morita', 1958, 'Japanese');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (5, 'Olusegun Adeyemi', 1970, 'Nigerian');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (6, 'Clara McAllister', 1988, 'Canadian');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (7, 'Pieter van Dijk', 1949, 'Dutch');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (8, 'Sofia Lindqvist', 1979, 'Swedish');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (9, 'Rahul Mehta', 1984, 'Indian');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (10, 'Elena Petrova', 1966, NULL);
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (11, 'James O''Connor', 1955, 'Irish');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (12, 'Yuki Tanaka', 1991, 'Japanese');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (13, 'Fatima El-Amin', 1973, 'Moroccan');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (14, 'Lucas Moreau', 1968, 'French');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (15, 'Hannah Becker', 1986, 'German');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (16, 'Diego Alvarez', 1977, 'Mexican');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (17, 'Ingrid Solberg', 1952, 'Norwegian');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (18, 'Marcus Whitfield', 1983, 'American');
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (19, 'Amara Nwosu', 1993, NULL);
INSERT INTO authors (author_id, name, birth_year, nationality) VALUES (20, 'Leo DiMarco', 1971, 'Italian');

INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (1, 'Hollow Tide', 15, 'Science', 2020, 655, 14.65);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (2, 'A Kingdom of Rain', 15, 'Science', 1994, 337, 21.36);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (3, 'A Bridge of Rain', 8, 'Science Fiction', 2003, 572, 20.9);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (4, 'A Lighthouse of Light', 20, 'Poetry', 1999, 413, 19.38);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (5, 'The Citadel''s Return', 1, 'Science Fiction', 1991, 687, NULL);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (6, 'The Golden Tide', 1, 'Science Fiction', 2014, 297, 20.95);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (7, 'An Atlas of Bones', 12, 'Poetry', 2014, 626, 33.32);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (8, 'A River of Light', 17, 'Fantasy', 1978, 226, NULL);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (9, 'A Cartographer of Ash', 20, 'Poetry', 2007, 283, 35.73);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (10, 'Midnight Cartographer', 5, 'Biography', 1987, 459, 10.03);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (11, 'A Garden of Stars', 9, 'Fantasy', 1998, 232, 12.62);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (12, 'The Echo''s Daughter', 17, 'Science Fiction', 1993, 237, 37.32);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (13, 'Silent Harbor', 13, 'Science', 2007, 185, 15.16);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (14, 'A Kingdom of Smoke', 19, 'Biography', 1998, 482, NULL);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (15, 'Broken Tide', 12, 'Biography', 2003, 195, 23.49);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (16, 'Hidden Lighthouse', 5, 'Poetry', 1985, 518, NULL);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (17, 'Iron Tide', 17, 'Fantasy', 2018, 703, 21.75);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (18, 'A Meridian of Light', 9, 'Mystery', 2005, 348, 16.91);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (19, 'The Last Garden', 19, 'History', 2006, 589, 16.07);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (20, 'Silent Cartographer', 20, 'History', 1978, 561, 28.02);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (21, 'Winter Garden', 2, 'History', 1995, 264, 37.3);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (22, 'The Orchard''s Secret', 16, 'Science Fiction', 2004, 251, 15.16);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (23, 'Iron Lighthouse', 8, 'Science Fiction', 1990, 301, 35.48);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (24, 'Winter Atlas', 2, 'Science Fiction', 2011, 663, 11.15);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (25, 'The Golden Atlas', 19, 'Biography', 2008, 271, 37.65);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (26, 'The Orchard''s Promise', 13, 'Biography', 2022, 201, 28.54);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (27, 'The Crimson Meridian', 10, 'Science Fiction', 1988, 537, 19.37);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (28, 'An Archive of Bones', 8, 'Fiction', 2004, 294, 22.87);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (29, 'The Kingdom''s Promise', 1, 'Mystery', 1999, 179, 23.77);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (30, 'The Salt Citadel', 5, 'Poetry', 2015, 518, 35.03);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (31, 'The Compass''s Daughter', 15, 'Mystery', 1997, 233, 8.63);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (32, 'The Garden''s Return', 2, 'Fantasy', 1981, 377, NULL);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (33, 'Winter Citadel', 4, 'Poetry', 1989, 570, 31.86);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (34, 'The Tide''s Secret', 20, 'Biography', 2003, 281, 23.49);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (35, 'The Archive''s Return', 17, 'Mystery', 1981, 683, 29.24);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (36, 'The Cartographer''s Promise', 20, 'Biography', 1986, 513, 15.28);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (37, 'Salt Cartographer', 3, 'History', 1984, 633, NULL);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (38, 'The Hollow Cartographer', 9, 'Science Fiction', 2002, 308, 24.64);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (39, 'Paper Echo', 14, 'Poetry', 2022, 195, 33.05);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (40, 'The Silent River', 9, 'Fantasy', 1988, 681, 29.66);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (41, 'Glass Orchard', 7, 'Science', 1981, 712, 22.29);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (42, 'Winter Bridge', 10, 'Science Fiction', 1986, 330, 20.74);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (43, 'The Hidden Tide', 3, 'Biography', 1994, 323, 8.21);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (44, 'An Atlas of Rain', 8, 'Science Fiction', 1988, 559, 33.88);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (45, 'A Lantern of Rain', 13, 'Poetry', 1992, 448, 16.57);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (46, 'The River''s Secret', 1, 'Science Fiction', 1984, 680, 34.62);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (47, 'Broken Kingdom', 15, 'Fiction', 2014, 354, 10.41);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (48, 'The Harbor''s Promise', 6, 'Fiction', 1986, 653, 20.17);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (49, 'An Orchard of Light', 6, 'Poetry', 2013, 455, 13.17);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (50, 'The Distant Tide', 17, 'Mystery', 2019, 681, 12.51);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (51, 'A Harbor of Bones', 15, 'Mystery', 2020, 381, 21.23);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (52, 'The Distant Cartographer', 12, 'Poetry', 1980, 496, 32.02);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (53, 'A Lantern of Ash', 2, 'Science Fiction', 2007, 526, 16.24);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (54, 'Hidden Kingdom', 5, 'Science', 2010, 432, 33.96);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (55, 'The Hollow Atlas', 12, 'Poetry', 2017, 168, 26.33);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (56, 'A Meridian of Rain', 19, 'History', 1987, 565, 23.54);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (57, 'Distant Garden', 1, 'Science Fiction', 2001, 340, 17.92);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (58, 'Crimson Meridian', 3, 'History', 2012, 419, 8.54);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (59, 'Last Garden', 17, 'Mystery', 1996, 548, NULL);
INSERT INTO books (book_id, title, author_id, genre, published_year, pages, price) VALUES (60, 'A Lighthouse of Bones', 13, 'Poetry', 2023, 483, 10.09);

INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (1, 'Grace', 'Ito', NULL, 'Riverton', '2022-01-02', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (2, 'Tessa', 'Rossi', 'tessa.rossi@mail.example', 'Riverton', '2022-10-16', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (3, 'Elliot', 'Young', 'elliot.young@mail.example', 'Ashford', '2021-07-22', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (4, 'Victor', 'Castillo', 'victor.castillo@mail.example', 'Millbrook', '2020-01-10', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (5, 'Aaron', 'Garcia', 'aaron.garcia@mail.example', 'Springfield', '2021-12-02', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (6, 'Jonas', 'Anderson', NULL, 'Riverton', '2020-11-14', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (7, 'Olivia', 'Patel', 'olivia.patel@mail.example', 'Springfield', '2019-04-09', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (8, 'Keira', 'Dubois', 'keira.dubois@mail.example', 'Riverton', '2021-10-09', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (9, 'Farid', 'Quinlan', NULL, 'Lakeside', '2023-04-21', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (10, 'Hanna', 'Schmidt', 'hanna.schmidt@mail.example', 'Lakeside', '2019-12-31', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (11, 'Samir', 'Garcia', 'samir.garcia@mail.example', 'Millbrook', '2023-10-27', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (12, 'Wen', 'McKenzie', 'wen.mckenzie@mail.example', 'Ashford', '2019-06-02', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (13, 'Dalia', 'Castillo', 'dalia.castillo@mail.example', 'Springfield', '2022-12-27', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (14, 'Keira', 'MacLeod', NULL, 'Riverton', '2022-07-08', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (15, 'Samir', 'Kowalski', 'samir.kowalski@mail.example', 'Lakeside', '2022-07-23', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (16, 'Sara', 'Okafor', 'sara.okafor@mail.example', 'Springfield', '2023-01-06', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (17, 'Yara', 'Garcia', 'yara.garcia@mail.example', 'Springfield', '2021-10-13', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (18, 'Nora', 'Xu', 'nora.xu@mail.example', 'Springfield', '2023-05-11', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (19, 'Uma', 'MacLeod', 'uma.macleod@mail.example', 'Riverton', '2023-01-10', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (20, 'Rosa', 'Brennan', 'rosa.brennan@mail.example', 'Ashford', '2022-05-25', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (21, 'Victor', 'Walsh', 'victor.walsh@mail.example', 'Riverton', '2020-01-09', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (22, 'Liam', 'Lopez', 'liam.lopez@mail.example', 'Lakeside', '2022-09-18', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (23, 'Marco', 'Xu', 'marco.xu@mail.example', 'Riverton', '2020-02-06', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (24, 'Priya', 'Brennan', 'priya.brennan@mail.example', 'Millbrook', '2020-11-01', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (25, 'Zoe', 'Brennan', NULL, 'Millbrook', '2020-07-28', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (26, 'Ravi', 'Fischer', 'ravi.fischer@mail.example', 'Millbrook', '2020-05-16', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (27, 'Aaron', 'Varga', 'aaron.varga@mail.example', 'Ashford', '2022-11-05', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (28, 'Hanna', 'Xu', 'hanna.xu@mail.example', 'Ashford', '2020-01-05', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (29, 'Chloe', 'van der Berg', 'chloe.vanderberg@mail.example', 'Millbrook', '2023-03-27', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (30, 'Ivan', 'Garcia', 'ivan.garcia@mail.example', 'Lakeside', '2020-05-30', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (31, 'Isabel', 'Garcia', 'isabel.garcia@mail.example', 'Springfield', '2019-02-10', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (32, 'Elliot', 'Castillo', 'elliot.castillo@mail.example', 'Millbrook', '2021-11-29', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (33, 'Victor', 'McKenzie', 'victor.mckenzie@mail.example', 'Riverton', '2021-08-04', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (34, 'Jonas', 'Nakamura', 'jonas.nakamura@mail.example', 'Riverton', '2022-09-22', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (35, 'Liam', 'McKenzie', 'liam.mckenzie@mail.example', 'Lakeside', '2022-01-01', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (36, 'Hanna', 'Tanaka', 'hanna.tanaka@mail.example', 'Lakeside', '2023-01-05', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (37, 'Vera', 'Zielinski', 'vera.zielinski@mail.example', 'Springfield', '2020-01-07', 'Student');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (38, 'Gabriel', 'MacLeod', NULL, 'Springfield', '2021-01-11', 'Premium');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (39, 'Farid', 'Young', 'farid.young@mail.example', 'Millbrook', '2019-05-19', 'Standard');
INSERT INTO members (member_id, first_name, last_name, email, city, joined_date, membership_type) VALUES (40, 'Grace', 'Quinlan', 'grace.quinlan@mail.example', 'Millbrook', '2022-07-09', 'Student');

INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (1, 60, 8, '2023-01-07', '2023-01-28', '2023-01-15', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (2, 34, 38, '2023-01-07', '2023-01-28', '2023-02-05', 2.8);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (3, 27, 22, '2023-01-16', '2023-02-06', '2023-02-19', 4.55);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (4, 16, 27, '2023-01-16', '2023-02-06', '2023-02-08', 0.7);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (5, 16, 24, '2023-01-19', '2023-02-09', '2023-02-23', 4.9);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (6, 6, 31, '2023-02-01', '2023-02-22', '2023-02-05', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (7, 29, 24, '2023-02-12', '2023-03-05', '2023-03-06', 0.35);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (8, 6, 25, '2023-02-18', '2023-03-11', '2023-02-22', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (9, 38, 26, '2023-02-20', '2023-03-13', '2023-03-04', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (10, 54, 30, '2023-03-01', '2023-03-22', '2023-03-27', 1.75);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (11, 53, 26, '2023-03-08', '2023-03-29', '2023-03-17', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (12, 53, 27, '2023-03-09', '2023-03-30', '2023-03-19', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (13, 57, 5, '2023-03-09', '2023-03-30', '2023-03-17', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (14, 6, 23, '2023-03-11', '2023-04-01', '2023-04-02', 0.35);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (15, 41, 36, '2023-03-13', '2023-04-03', '2023-04-07', 1.4);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (16, 10, 27, '2023-03-14', '2023-04-04', '2023-03-16', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (17, 8, 6, '2023-03-14', '2023-04-04', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (18, 24, 5, '2023-03-20', '2023-04-10', '2023-04-01', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (19, 3, 2, '2023-04-05', '2023-04-26', '2023-04-15', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (20, 13, 27, '2023-04-06', '2023-04-27', '2023-04-10', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (21, 33, 30, '2023-04-07', '2023-04-28', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (22, 16, 27, '2023-04-11', '2023-05-02', '2023-05-04', 0.7);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (23, 44, 40, '2023-04-12', '2023-05-03', '2023-05-13', 3.5);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (24, 16, 17, '2023-04-15', '2023-05-06', '2023-05-14', 2.8);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (25, 57, 35, '2023-04-21', '2023-05-12', '2023-05-23', 3.85);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (26, 57, 12, '2023-04-22', '2023-05-13', '2023-04-27', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (27, 27, 36, '2023-04-27', '2023-05-18', '2023-05-15', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (28, 56, 26, '2023-04-28', '2023-05-19', '2023-05-21', 0.7);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (29, 35, 23, '2023-04-28', '2023-05-19', '2023-05-31', 4.2);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (30, 35, 1, '2023-05-01', '2023-05-22', '2023-05-06', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (31, 35, 29, '2023-05-03', '2023-05-24', '2023-05-07', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (32, 12, 28, '2023-05-04', '2023-05-25', '2023-05-30', 1.75);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (33, 38, 38, '2023-05-12', '2023-06-02', '2023-05-25', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (34, 31, 26, '2023-05-19', '2023-06-09', '2023-05-23', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (35, 20, 30, '2023-05-21', '2023-06-11', '2023-06-17', 2.1);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (36, 40, 20, '2023-05-28', '2023-06-18', '2023-06-29', 3.85);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (37, 8, 22, '2023-05-29', '2023-06-19', '2023-06-06', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (38, 16, 21, '2023-05-29', '2023-06-19', '2023-07-01', 4.2);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (39, 10, 32, '2023-05-30', '2023-06-20', '2023-06-05', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (40, 26, 32, '2023-05-30', '2023-06-20', '2023-06-07', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (41, 13, 20, '2023-06-04', '2023-06-25', '2023-07-02', 2.45);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (42, 30, 18, '2023-06-07', '2023-06-28', '2023-07-04', 2.1);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (43, 28, 36, '2023-06-11', '2023-07-02', '2023-06-25', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (44, 49, 13, '2023-06-14', '2023-07-05', '2023-06-19', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (45, 27, 29, '2023-06-15', '2023-07-06', '2023-07-11', 1.75);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (46, 32, 16, '2023-07-05', '2023-07-26', '2023-08-03', 2.8);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (47, 28, 29, '2023-07-09', '2023-07-30', '2023-08-09', 3.5);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (48, 15, 40, '2023-07-09', '2023-07-30', '2023-07-13', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (49, 8, 26, '2023-07-13', '2023-08-03', '2023-07-28', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (50, 10, 8, '2023-07-14', '2023-08-04', '2023-07-20', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (51, 18, 23, '2023-07-16', '2023-08-06', '2023-07-25', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (52, 47, 12, '2023-07-19', '2023-08-09', '2023-07-21', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (53, 33, 39, '2023-07-22', '2023-08-12', '2023-08-23', 3.85);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (54, 18, 21, '2023-07-23', '2023-08-13', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (55, 35, 15, '2023-07-27', '2023-08-17', '2023-07-31', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (56, 18, 9, '2023-07-30', '2023-08-20', '2023-08-29', 3.15);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (57, 10, 27, '2023-08-01', '2023-08-22', '2023-08-18', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (58, 5, 4, '2023-08-24', '2023-09-14', '2023-09-26', 4.2);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (59, 42, 14, '2023-08-25', '2023-09-15', '2023-09-09', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (60, 31, 4, '2023-08-27', '2023-09-17', '2023-09-12', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (61, 2, 19, '2023-08-30', '2023-09-20', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (62, 27, 13, '2023-09-02', '2023-09-23', '2023-09-23', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (63, 55, 10, '2023-09-03', '2023-09-24', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (64, 12, 6, '2023-09-04', '2023-09-25', '2023-09-08', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (65, 15, 4, '2023-09-06', '2023-09-27', '2023-10-09', 4.2);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (66, 57, 38, '2023-09-06', '2023-09-27', '2023-10-02', 1.75);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (67, 32, 8, '2023-09-08', '2023-09-29', '2023-10-03', 1.4);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (68, 53, 29, '2023-09-14', '2023-10-05', '2023-09-30', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (69, 15, 19, '2023-09-18', '2023-10-09', '2023-10-18', 3.15);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (70, 45, 3, '2023-09-20', '2023-10-11', '2023-09-29', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (71, 34, 1, '2023-09-27', '2023-10-18', '2023-10-22', 1.4);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (72, 30, 17, '2023-10-02', '2023-10-23', '2023-10-27', 1.4);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (73, 18, 32, '2023-10-02', '2023-10-23', '2023-10-20', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (74, 22, 14, '2023-10-04', '2023-10-25', '2023-10-20', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (75, 12, 24, '2023-10-09', '2023-10-30', '2023-10-31', 0.35);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (76, 22, 33, '2023-10-12', '2023-11-02', '2023-11-11', 3.15);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (77, 26, 2, '2023-10-14', '2023-11-04', '2023-10-31', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (78, 52, 26, '2023-10-18', '2023-11-08', '2023-11-19', 3.85);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (79, 10, 28, '2023-10-19', '2023-11-09', '2023-11-22', 4.55);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (80, 8, 26, '2023-10-20', '2023-11-10', '2023-11-06', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (81, 51, 5, '2023-10-25', '2023-11-15', '2023-11-26', 3.85);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (82, 35, 16, '2023-10-27', '2023-11-17', '2023-11-04', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (83, 34, 37, '2023-10-30', '2023-11-20', '2023-11-06', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (84, 13, 17, '2023-10-30', '2023-11-20', '2023-11-21', 0.35);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (85, 11, 18, '2023-11-03', '2023-11-24', '2023-12-06', 4.2);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (86, 19, 36, '2023-11-05', '2023-11-26', '2023-11-07', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (87, 31, 17, '2023-11-10', '2023-12-01', '2023-11-19', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (88, 14, 11, '2023-11-19', '2023-12-10', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (89, 57, 24, '2023-11-23', '2023-12-14', '2023-12-14', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (90, 40, 11, '2023-11-25', '2023-12-16', '2023-12-16', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (91, 15, 21, '2023-11-25', '2023-12-16', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (92, 30, 40, '2023-11-30', '2023-12-21', '2023-12-18', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (93, 57, 27, '2023-12-01', '2023-12-22', '2023-12-21', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (94, 34, 32, '2023-12-10', '2023-12-31', '2024-01-08', 2.8);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (95, 38, 28, '2023-12-12', '2024-01-02', '2024-01-07', 1.75);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (96, 35, 16, '2023-12-15', '2024-01-05', '2023-12-19', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (97, 57, 40, '2023-12-16', '2024-01-06', '2023-12-29', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (98, 31, 26, '2023-12-20', '2024-01-10', '2024-01-22', 4.2);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (99, 24, 10, '2023-12-25', '2024-01-15', '2024-01-11', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (100, 3, 33, '2023-12-28', '2024-01-18', '2024-01-06', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (101, 32, 16, '2024-01-22', '2024-02-12', '2024-02-18', 2.1);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (102, 12, 2, '2024-01-28', '2024-02-18', '2024-02-23', 1.75);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (103, 37, 3, '2024-02-06', '2024-02-27', '2024-03-11', 4.55);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (104, 59, 39, '2024-02-11', '2024-03-03', '2024-03-16', 4.55);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (105, 15, 7, '2024-02-18', '2024-03-10', '2024-03-13', 1.05);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (106, 35, 37, '2024-02-18', '2024-03-10', '2024-02-25', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (107, 43, 1, '2024-02-19', '2024-03-11', '2024-02-25', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (108, 35, 28, '2024-02-19', '2024-03-11', '2024-03-25', 4.9);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (109, 57, 10, '2024-02-27', '2024-03-19', '2024-03-12', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (110, 27, 4, '2024-03-01', '2024-03-22', '2024-04-02', 3.85);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (111, 41, 37, '2024-03-05', '2024-03-26', '2024-03-13', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (112, 27, 18, '2024-03-11', '2024-04-01', '2024-03-19', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (113, 13, 19, '2024-03-14', '2024-04-04', '2024-03-27', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (114, 35, 32, '2024-03-17', '2024-04-07', '2024-04-10', 1.05);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (115, 41, 4, '2024-03-24', '2024-04-14', '2024-03-31', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (116, 27, 38, '2024-03-25', '2024-04-15', '2024-03-28', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (117, 18, 32, '2024-04-02', '2024-04-23', '2024-04-29', 2.1);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (118, 17, 28, '2024-04-03', '2024-04-24', '2024-04-13', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (119, 59, 29, '2024-04-11', '2024-05-02', '2024-04-19', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (120, 41, 18, '2024-04-14', '2024-05-05', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (121, 9, 20, '2024-04-17', '2024-05-08', '2024-04-27', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (122, 32, 18, '2024-04-21', '2024-05-12', '2024-05-15', 1.05);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (123, 35, 12, '2024-04-24', '2024-05-15', '2024-05-23', 2.8);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (124, 27, 6, '2024-04-27', '2024-05-18', '2024-05-21', 1.05);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (125, 42, 15, '2024-05-01', '2024-05-22', '2024-05-31', 3.15);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (126, 2, 34, '2024-05-04', '2024-05-25', '2024-05-24', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (127, 1, 8, '2024-05-07', '2024-05-28', '2024-05-27', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (128, 32, 21, '2024-05-10', '2024-05-31', '2024-06-14', 4.9);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (129, 21, 24, '2024-05-15', '2024-06-05', '2024-06-06', 0.35);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (130, 24, 23, '2024-05-17', '2024-06-07', '2024-06-15', 2.8);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (131, 13, 14, '2024-05-19', '2024-06-09', '2024-06-04', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (132, 18, 40, '2024-05-23', '2024-06-13', '2024-06-03', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (133, 10, 11, '2024-05-28', '2024-06-18', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (134, 27, 9, '2024-05-31', '2024-06-21', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (135, 24, 19, '2024-06-07', '2024-06-28', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (136, 33, 2, '2024-06-08', '2024-06-29', '2024-07-07', 2.8);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (137, 31, 11, '2024-06-16', '2024-07-07', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (138, 48, 25, '2024-06-17', '2024-07-08', NULL, NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (139, 20, 16, '2024-06-19', '2024-07-10', '2024-06-27', NULL);
INSERT INTO loans (loan_id, book_id, member_id, loan_date, due_date, return_date, fine) VALUES (140, 54, 16, '2024-06-20', '2024-07-11', NULL, NULL);
